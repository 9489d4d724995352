//! Well-known provider token formats.
//!
//! Source: the default rule set of gitleaks, `config/gitleaks.toml` in
//! <https://github.com/gitleaks/gitleaks> (MIT licence): the prefixes,
//! alphabets and lengths below are the facts its rules state, rewritten for
//! one combined automaton. Differences, all on the side of redacting more:
//!
//! * every length is a minimum (the match runs on while the alphabet lasts,
//!   and [`super::detect`] extends any match that ends inside a word to the
//!   word's end), and the trailing context gitleaks requires is dropped;
//! * gitleaks' entropy thresholds and allow-lists (`…EXAMPLE` AWS ids,
//!   published sample keys) are not applied: a sample key in an argument is
//!   redacted like a real one;
//! * OpenAI: besides gitleaks' `T3BlbkFJ`-marked keys, any `sk-` key of 32 or
//!   more characters (`sk-proj-…`, `sk-svcacct-…`, and other providers' keys
//!   of the same shape) is redacted; Anthropic: any `sk-ant-<kind><nn>-` key
//!   (gitleaks names `api03` and `admin01`);
//! * Hugging Face tokens may contain digits (gitleaks: letters only).
//!
//! Rules that gitleaks can only match next to a provider's name
//! (`twitter … = <32 hex>`) are covered by the assignment detector instead
//! when the name is secret-named, and are otherwise out of scope.

/// One token format.
pub(super) struct Provider {
    /// What the token is (gitleaks' rule id where there is one); the corpus
    /// tests check that every name has a shape.
    #[cfg_attr(not(test), allow(dead_code))]
    pub name: &'static str,
    /// The pattern, in `regex` syntax, without a leading boundary.
    pub pattern: &'static str,
    /// Which part of a match is the secret.
    pub shape: Shape,
}

/// Which part of a match is the secret.
#[derive(Clone, Copy)]
pub(super) enum Shape {
    /// The whole match, which starts at an ASCII word boundary.
    Token,
    /// Everything after the match's `n`-th `/` (a webhook URL's path: the
    /// host stays readable).
    AfterSlash(usize),
    /// The match plus the `min..=max` characters of `[A-Za-z0-9_~.]` just
    /// before it, which must not follow a word character — or, with
    /// `digits`, of digits, which may (`…/bot123456789:AA…`): formats whose
    /// distinctive part is in the middle (`…8Q~…` Azure secrets,
    /// `<bot id>:A…` Telegram tokens).
    Before {
        min: usize,
        max: usize,
        digits: bool,
    },
}

use Shape::{AfterSlash, Before, Token};

/// The table, most specific first (at one start, the first that matches wins).
pub(super) const PROVIDERS: &[Provider] = &[
    p(
        "aws-access-key-id",
        r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16,}",
        Token,
    ),
    p("github-pat", r"ghp_[0-9A-Za-z]{36,}", Token),
    p("github-oauth", r"gho_[0-9A-Za-z]{36,}", Token),
    p("github-app-token", r"gh[us]_[0-9A-Za-z]{36,}", Token),
    p("github-refresh-token", r"ghr_[0-9A-Za-z]{36,}", Token),
    p(
        "github-fine-grained-pat",
        r"github_pat_[0-9A-Za-z_]{82,}",
        Token,
    ),
    p(
        "gitlab-token",
        r"gl(?:pat|dt|ft|rt|soat|ffct|imt|cbt|agent|oas|ptt)-[0-9A-Za-z_-]{20,}",
        Token,
    ),
    p(
        "gitlab-runner-registration",
        r"GR1348941[0-9A-Za-z_-]{20,}",
        Token,
    ),
    p(
        "slack-config-token",
        r"xoxe\.xox[bp]-[0-9A-Za-z-]{10,}",
        Token,
    ),
    p("slack-token", r"xox[abeoprs]-[0-9A-Za-z-]{8,}", Token),
    p("slack-app-token", r"xapp-[0-9]-[0-9A-Za-z-]{10,}", Token),
    p(
        "slack-webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,}",
        AfterSlash(2),
    ),
    p(
        "microsoft-teams-webhook",
        r"\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/-]{60,}",
        AfterSlash(2),
    ),
    p(
        "anthropic-api-key",
        r"sk-ant-(?:api|admin|oat|sid)[0-9]{2}-[A-Za-z0-9_-]{20,}",
        Token,
    ),
    p(
        "openai-api-key",
        r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}",
        Token,
    ),
    p(
        "openai-legacy-key",
        r"sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20,}",
        Token,
    ),
    p("sk-api-key", r"sk-[A-Za-z0-9_-]{32,}", Token),
    p(
        "stripe-key",
        r"(?:sk|rk)_(?:test|live|prod)_[A-Za-z0-9]{10,}",
        Token,
    ),
    p("gcp-api-key", r"AIza[0-9A-Za-z_-]{35,}", Token),
    p("npm-access-token", r"npm_[A-Za-z0-9]{36,}", Token),
    p(
        "pypi-upload-token",
        r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        Token,
    ),
    p("twilio-api-key", r"SK[0-9a-fA-F]{32,}", Token),
    p("sendgrid-api-token", r"SG\.[A-Za-z0-9=_.-]{66,}", Token),
    p(
        "shopify-token",
        r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32,}",
        Token,
    ),
    p("digitalocean-token", r"do[opr]_v1_[a-f0-9]{64,}", Token),
    p("huggingface-access-token", r"hf_[A-Za-z0-9]{34,}", Token),
    p("huggingface-org-token", r"api_org_[A-Za-z0-9]{34,}", Token),
    p(
        "azure-ad-client-secret",
        r"[0-9]Q~[A-Za-z0-9_~.-]{31,}",
        Before {
            min: 3,
            max: 3,
            digits: false,
        },
    ),
    p(
        "telegram-bot-token",
        r":A[A-Za-z0-9_-]{34,}",
        Before {
            min: 5,
            max: 16,
            digits: true,
        },
    ),
    p(
        "hashicorp-tf-api-token",
        r"\.atlasv1\.[A-Za-z0-9_=-]{60,}",
        Before {
            min: 14,
            max: 14,
            digits: false,
        },
    ),
    p(
        "1password-service-account-token",
        r"ops_eyJ[A-Za-z0-9+/]{250,}={0,3}",
        Token,
    ),
    p(
        "age-secret-key",
        r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58,}",
        Token,
    ),
    p("adobe-client-secret", r"p8e-[A-Za-z0-9]{32,}", Token),
    p("alibaba-access-key-id", r"LTAI[A-Za-z0-9]{20,}", Token),
    p("artifactory-api-key", r"AKCp[A-Za-z0-9]{69,}", Token),
    p(
        "artifactory-reference-token",
        r"cmVmd[A-Za-z0-9]{59,}",
        Token,
    ),
    p("atlassian-api-token", r"ATATT3[A-Za-z0-9_=-]{186,}", Token),
    p("clickhouse-cloud-secret", r"4b1d[A-Za-z0-9]{38,}", Token),
    p("clojars-api-token", r"CLOJARS_[A-Za-z0-9]{60,}", Token),
    p(
        "databricks-api-token",
        r"dapi[a-f0-9]{32,}(?:-[0-9])?",
        Token,
    ),
    p("doppler-api-token", r"dp\.pt\.[A-Za-z0-9]{43,}", Token),
    p(
        "dynatrace-api-token",
        r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64,}",
        Token,
    ),
    p(
        "duffel-api-token",
        r"duffel_(?:test|live)_[A-Za-z0-9_=-]{43,}",
        Token,
    ),
    p("easypost-api-token", r"EZ[AT]K[A-Za-z0-9]{54,}", Token),
    p(
        "facebook-page-access-token",
        r"EAA[MC][A-Za-z0-9]{100,}",
        Token,
    ),
    p(
        "flutterwave-secret-key",
        r"FLWSECK_TEST-[A-Ha-h0-9]{12,}(?:-X)?",
        Token,
    ),
    p(
        "flyio-access-token",
        r"(?:fo1_[A-Za-z0-9_-]{43,}|fm[12][ar]?_[A-Za-z0-9+/]{100,}={0,3})",
        Token,
    ),
    p("frameio-api-token", r"fio-u-[A-Za-z0-9_=-]{64,}", Token),
    p("grafana-api-key", r"eyJrIjoi[A-Za-z0-9]{70,}={0,3}", Token),
    p(
        "grafana-cloud-api-token",
        r"glc_[A-Za-z0-9+/]{32,}={0,3}",
        Token,
    ),
    p(
        "grafana-service-account-token",
        r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8,}",
        Token,
    ),
    p("heroku-api-key-v2", r"HRKU-AA[0-9A-Za-z_-]{58,}", Token),
    p("infracost-api-token", r"ico-[A-Za-z0-9]{32,}", Token),
    p("linear-api-key", r"lin_api_[A-Za-z0-9]{40,}", Token),
    p("new-relic-user-api-key", r"NRAK-[A-Z0-9]{27,}", Token),
    p("new-relic-insert-key", r"NRII-[A-Za-z0-9-]{32,}", Token),
    p("new-relic-browser-api-token", r"NRJS-[a-f0-9]{19,}", Token),
    p("notion-api-token", r"ntn_[0-9]{11}[A-Za-z0-9]{35,}", Token),
    p("octopus-deploy-api-key", r"API-[A-Z0-9]{26,}", Token),
    p("openshift-user-token", r"sha256~[A-Za-z0-9_-]{43,}", Token),
    p("perplexity-api-key", r"pplx-[A-Za-z0-9]{48,}", Token),
    p(
        "planetscale-token",
        r"pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.-]{32,}",
        Token,
    ),
    p(
        "postman-api-token",
        r"PMAK-[A-Fa-f0-9]{24}-[A-Fa-f0-9]{34,}",
        Token,
    ),
    p("prefect-api-token", r"pnu_[A-Za-z0-9]{36,}", Token),
    p("pulumi-api-token", r"pul-[a-f0-9]{40,}", Token),
    p("readme-api-token", r"rdme_[a-z0-9]{70,}", Token),
    p("rubygems-api-token", r"rubygems_[a-f0-9]{48,}", Token),
    p("scalingo-api-token", r"tk-us-[A-Za-z0-9_-]{48,}", Token),
    p(
        "sendinblue-api-token",
        r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16,}",
        Token,
    ),
    p("sentry-user-token", r"sntryu_[a-f0-9]{64,}", Token),
    p(
        "sentry-org-token",
        r"sntrys_eyJpYXQiO[A-Za-z0-9+/=_]{50,}",
        Token,
    ),
    p(
        "settlemint-token",
        r"sm_(?:aat|pat|sat)_[A-Za-z0-9]{16,}",
        Token,
    ),
    p(
        "shippo-api-token",
        r"shippo_(?:live|test)_[a-fA-F0-9]{40,}",
        Token,
    ),
    p(
        "square-access-token",
        r"(?:EAAA|sq0atp-)[A-Za-z0-9_-]{22,}",
        Token,
    ),
    p("vault-service-token", r"hvs\.[A-Za-z0-9_-]{90,}", Token),
    p("vault-batch-token", r"hvb\.[A-Za-z0-9_-]{138,}", Token),
];

const fn p(name: &'static str, pattern: &'static str, shape: Shape) -> Provider {
    Provider {
        name,
        pattern,
        shape,
    }
}
