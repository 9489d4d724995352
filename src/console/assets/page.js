// approval-gate's console extension (architecture/integration.md § Console).
//
// Hand-written ES module: `react` comes from the console's import map (never
// bundled), elements are made with createElement, and no build step runs.
// `setup(host)` registers three things:
//   - the configuration form of the `approval-gate` entry (every field; it
//     keeps unknown fields and ${ENV} templates as they are, masks secrets and
//     checks each draft with approval::simulate before the host saves it);
//   - the Approvals page: held calls, live, with every decision a link page
//     offers and a turn's batch;
//   - the session mode chip, when the console has a chat.
// Every action calls this worker's own functions. Everything shown of a call
// comes redacted from the worker and is rendered as text, never as HTML.

import {
  createElement as h,
  Fragment,
  useCallback,
  useEffect,
  useMemo,
  useRef,
  useState,
} from "react";

const FAMILY = "approval-gate";
const MODES = ["manual", "auto", "full"];
const ACTIONS = ["allow", "deny", "ask"];
const OPERATORS = ["equals", "matches", "prefix", "runs"];
const DEFAULT_RULES = ["!approval::*"];
const SIMULATE_DEBOUNCE_MS = 600;

// The fields this form knows, in the order it shows them. Anything else in
// the value is kept as it is and listed under "Other fields".
const KNOWN_FIELDS = [
  "default_mode", "rule_precedence", "grant_reask_limit", "human_only_extra",
  "rules",
  "pending_timeout_ms", "escalate_after_ms", "release_timeout_ms", "resolve_wait_ms",
  "reviewer", "links", "decision_log", "gate_priority", "binding_check_interval_ms",
  "suggest_prefixes", "protected_paths", "protected_path_functions", "edit_ttl_max_ms",
];

// ---------------------------------------------------------------------------
// Values (pure)

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function asObject(value) {
  return isObject(value) ? value : {};
}

// `root` with the value at `path` replaced by `next` (`undefined` removes the
// key); every other key, known or not, stays as it is.
function setIn(root, path, next) {
  if (path.length === 0) return next;
  const [key, ...rest] = path;
  const base = Array.isArray(root) ? [...root] : isObject(root) ? { ...root } : typeof key === "number" ? [] : {};
  const child = setIn(base[key], rest, next);
  if (child === undefined && !Array.isArray(base)) delete base[key];
  else base[key] = child;
  return base;
}

function getIn(root, path) {
  let at = root;
  for (const key of path) {
    if (at === null || typeof at !== "object") return undefined;
    at = at[key];
  }
  return at;
}

// RFC 6901, as the host names fields in `errors` and `focusField`.
function pointer(path) {
  return path.length === 0 ? "" : "/" + path.map((s) => String(s).replace(/~/g, "~0").replace(/\//g, "~1")).join("/");
}

const LONE_TEMPLATE = /^\s*\$\{([^}:]+)(?::([^}]*))?\}\s*$/;
const ANY_TEMPLATE = /\$\{([^}:]+)(?::[^}]*)?\}/;

function templateName(value) {
  const found = typeof value === "string" ? ANY_TEMPLATE.exec(value) : null;
  return found ? found[1] : null;
}

// A lone template's default read as the engine reads it (a YAML scalar).
function scalar(text) {
  const t = text.trim();
  if (/^-?\d+$/.test(t)) return Number(t);
  if (/^-?\d*\.\d+$/.test(t)) return Number(t);
  if (t === "true") return true;
  if (t === "false") return false;
  if (t === "null" || t === "~" || t === "") return null;
  return text;
}

// The draft as the worker can judge it: the engine expands ${NAME:default}
// when it reads a value, simulate does not, so a lone template is replaced by
// its default and a leaf whose template has none is left out (the worker's
// default applies) and named. `links` is left out: it decides no verdict and
// its secrets need not travel.
function judgeable(draft) {
  const unresolved = [];
  const walk = (value, path) => {
    if (typeof value === "string") {
      const lone = LONE_TEMPLATE.exec(value);
      if (lone) {
        if (lone[2] === undefined) {
          unresolved.push(pointer(path));
          return undefined;
        }
        return scalar(lone[2]);
      }
      return value;
    }
    if (Array.isArray(value)) return value.map((item, i) => walk(item, [...path, i])).filter((item) => item !== undefined);
    if (isObject(value)) {
      const out = {};
      for (const [key, item] of Object.entries(value)) {
        const next = walk(item, [...path, key]);
        if (next !== undefined) out[key] = next;
      }
      return out;
    }
    return value;
  };
  const { links: _links, ...judged } = asObject(draft);
  return { config: walk(judged, []), unresolved };
}

// Agent text with invisible and direction-changing characters shown as
// markers instead of obeyed (as the link page shows them).
const HIDDEN = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u00AD\u061C\u180E\u200B-\u200F\u2028-\u202E\u2060-\u206F\uFEFF\uFFF9-\uFFFB]|\uDB40[\uDC00-\uDC7F]/g;

function visible(text) {
  return String(text).replace(HIDDEN, (c) => `⟨U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}⟩`);
}

function pretty(value) {
  try {
    return visible(JSON.stringify(value, null, 2) ?? "null");
  } catch {
    return "(not shown)";
  }
}

function when(ms) {
  if (typeof ms !== "number") return "";
  const date = new Date(ms);
  return Number.isNaN(date.getTime()) ? String(ms) : date.toLocaleString();
}

function inWords(ms, now) {
  const left = Math.round((ms - now) / 1000);
  if (left <= 0) return "now";
  if (left < 90) return `in ${left} s`;
  if (left < 5400) return `in ${Math.round(left / 60)} min`;
  return `in ${Math.round(left / 3600)} h`;
}

function failure(error) {
  if (!error) return "failed";
  const code = error.code ? `${error.code}: ` : "";
  const message = String(error.message ?? error);
  return message.startsWith(code) ? message : code + message;
}

// ---------------------------------------------------------------------------
// Form parts

let nextId = 0;
function useId(prefix) {
  const ref = useRef(null);
  if (ref.current === null) ref.current = `ag-${prefix}-${++nextId}`;
  return ref.current;
}

function Field({ label, hint, path, errors, children, inputId }) {
  const at = pointer(path);
  const error = errors && typeof errors.get === "function" ? errors.get(at) : undefined;
  return h(
    "div",
    { className: error ? "ag-field ag-field--error" : "ag-field", "data-field": at },
    h("label", { className: "ag-label", htmlFor: inputId }, label),
    children,
    hint ? h("p", { className: "ag-hint" }, hint) : null,
    error ? h("p", { className: "ag-error", role: "alert" }, error) : null,
  );
}

function TextInput({ id, value, onChange, placeholder, type = "text", label }) {
  return h("input", {
    id,
    type,
    className: "ag-input",
    value: typeof value === "string" ? value : value === undefined || value === null ? "" : String(value),
    placeholder,
    "aria-label": label,
    spellCheck: false,
    autoComplete: "off",
    onChange: (e) => onChange(e.target.value),
  });
}

// A whole number, or a ${NAME} template kept as text; empty removes the
// field (the worker's default applies). What cannot be either is shown with
// an error and not proposed.
function NumberField({ id, value, onChange, placeholder, label }) {
  const shown = typeof value === "number" ? String(value) : typeof value === "string" ? value : "";
  const [text, setText] = useState(shown);
  const [bad, setBad] = useState(false);
  useEffect(() => {
    setText((current) => (current === shown || bad ? current : shown));
  }, [shown]);
  return h(
    Fragment,
    null,
    h("input", {
      id,
      className: bad ? "ag-input ag-input--bad" : "ag-input",
      inputMode: "numeric",
      value: text,
      placeholder,
      "aria-label": label,
      "aria-invalid": bad,
      spellCheck: false,
      autoComplete: "off",
      onChange: (e) => {
        const next = e.target.value;
        setText(next);
        if (next.trim() === "") {
          setBad(false);
          onChange(undefined);
        } else if (/^\d+$/.test(next.trim())) {
          setBad(false);
          onChange(Number(next.trim()));
        } else if (ANY_TEMPLATE.test(next)) {
          setBad(false);
          onChange(next);
        } else {
          setBad(true);
        }
      },
    }),
    bad ? h("p", { className: "ag-error" }, "A whole number, or ${NAME} to read it from the environment.") : null,
  );
}

function Choice({ options, value, onChange, label, labels }) {
  return h(
    "div",
    { className: "ag-choice", role: "radiogroup", "aria-label": label },
    options.map((option) =>
      h(
        "button",
        {
          key: option,
          type: "button",
          role: "radio",
          "aria-checked": value === option,
          "data-value": option,
          className: value === option ? "ag-choice__item ag-choice__item--on" : "ag-choice__item",
          onClick: () => onChange(option),
        },
        labels?.[option] ?? option,
      ),
    ),
  );
}

function Toggle({ checked, onChange, label, id }) {
  return h(
    "label",
    { className: "ag-toggle" },
    h("input", { id, type: "checkbox", checked: Boolean(checked), onChange: (e) => onChange(e.target.checked) }),
    h("span", null, label),
  );
}

function StringList({ value, onChange, placeholder, addLabel, label }) {
  const items = Array.isArray(value) ? value : [];
  return h(
    "div",
    { className: "ag-list" },
    items.map((item, i) =>
      h(
        "div",
        { className: "ag-row", key: i },
        typeof item === "string"
          ? h(TextInput, {
              value: item,
              placeholder,
              label: `${label} ${i + 1}`,
              onChange: (next) => onChange(items.map((x, j) => (j === i ? next : x))),
            })
          : h("code", { className: "ag-kept" }, `${JSON.stringify(item)} (kept as is)`),
        h(
          "button",
          { type: "button", className: "ag-button ag-button--quiet", "aria-label": `Remove ${label} ${i + 1}`, onClick: () => onChange(items.filter((_, j) => j !== i)) },
          "Remove",
        ),
      ),
    ),
    h("button", { type: "button", className: "ag-button", onClick: () => onChange([...items, ""]) }, addLabel),
  );
}

// Modes a rule or the reviewer applies in. With `allowEvery`, absent means
// every mode (a rule's `modes`).
function ModesPicker({ value, onChange, allowEvery, label }) {
  const every = allowEvery && !Array.isArray(value);
  const chosen = Array.isArray(value) ? value : allowEvery ? MODES : [];
  return h(
    "div",
    { className: "ag-modes", role: "group", "aria-label": label },
    allowEvery
      ? h(Toggle, {
          label: "Every mode",
          checked: every,
          onChange: (on) => onChange(on ? undefined : [...MODES]),
        })
      : null,
    every
      ? null
      : MODES.map((mode) =>
          h(Toggle, {
            key: mode,
            label: mode,
            checked: chosen.includes(mode),
            onChange: (on) => onChange(on ? MODES.filter((m) => m === mode || chosen.includes(m)) : chosen.filter((m) => m !== mode)),
          }),
        ),
  );
}

// A credential is never put in the page: it shows where it comes from, and
// typing a new one replaces it.
function SecretField({ id, value, onChange, label, optional }) {
  const [editing, setEditing] = useState(false);
  // What was there before typing began: emptying the input, or Cancel,
  // puts it back (an empty input never removes the credential).
  const before = useRef(value);
  const name = templateName(value);
  const set = typeof value === "string" && value !== "";
  const state = name ? `set via \${${name}}` : set ? "•••• (set)" : "not set";
  return h(
    "div",
    { className: "ag-secret" },
    h("span", { className: "ag-secret__state", "data-secret-state": name ? "template" : set ? "set" : "unset" }, state),
    editing
      ? h("input", {
          id,
          type: "password",
          className: "ag-input",
          "aria-label": `New ${label}`,
          placeholder: "a new value, or ${NAME}",
          autoComplete: "new-password",
          onChange: (e) => onChange(e.target.value === "" ? before.current : e.target.value),
        })
      : h(
          "button",
          {
            type: "button",
            className: "ag-button",
            onClick: () => {
              before.current = value;
              setEditing(true);
            },
          },
          set ? "Replace" : "Set",
        ),
    editing
      ? h(
          "button",
          {
            type: "button",
            className: "ag-button ag-button--quiet",
            onClick: () => {
              onChange(before.current);
              setEditing(false);
            },
          },
          "Cancel",
        )
      : null,
    optional && set && !editing ? h("button", { type: "button", className: "ag-button ag-button--quiet", onClick: () => onChange(undefined) }, "Remove") : null,
  );
}

function Section({ title, intro, children, id }) {
  return h(
    "section",
    { className: "ag-section", "aria-labelledby": id },
    h("h3", { className: "ag-section__title", id }, title),
    intro ? h("p", { className: "ag-hint" }, intro) : null,
    children,
  );
}

// ---------------------------------------------------------------------------
// Rules

// A shorthand's parts: "!glob" denies, "?glob" asks, anything else allows.
function shorthand(rule) {
  if (rule.startsWith("!")) return { action: "deny", glob: rule.slice(1) };
  if (rule.startsWith("?")) return { action: "ask", glob: rule.slice(1) };
  return { action: "allow", glob: rule };
}

// The shorthand for an action and a glob, or null when a shorthand cannot
// say it (an allowed glob that starts with ! or ?).
function toShorthand(action, glob) {
  if (action === "deny") return `!${glob}`;
  if (action === "ask") return `?${glob}`;
  return glob.startsWith("!") || glob.startsWith("?") ? null : glob;
}

function constraintParts(constraint) {
  if (!isObject(constraint)) return null;
  const keys = Object.keys(constraint);
  if (keys.length !== 1 || !OPERATORS.includes(keys[0])) return null;
  return { op: keys[0], operand: constraint[keys[0]] };
}

// `equals` takes any JSON; what does not parse as JSON is a string.
function operandText(op, operand) {
  if (op === "equals") return JSON.stringify(operand);
  return typeof operand === "string" ? operand : JSON.stringify(operand);
}

function operandValue(op, text) {
  if (op !== "equals") return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function ArgsEditor({ args, onChange, path, errors }) {
  const entries = Object.entries(asObject(args));
  const rebuild = (next) => {
    if (next.length === 0) return onChange(undefined);
    const out = {};
    for (const [field, constraint] of next) out[field] = constraint;
    onChange(out);
  };
  return h(
    "div",
    { className: "ag-args", "data-field": pointer(path) },
    entries.map(([field, constraint], i) => {
      const parts = constraintParts(constraint);
      const at = pointer([...path, field]);
      const error = errors?.get?.(at);
      return h(
        "div",
        { className: "ag-constraint", key: i, "data-field": at },
        h(TextInput, {
          value: field,
          label: "Argument",
          placeholder: "command, or /a/json/pointer",
          onChange: (name) => rebuild(entries.map((e, j) => (j === i ? [name, e[1]] : e))),
        }),
        parts
          ? h(
              "select",
              {
                className: "ag-select",
                "aria-label": "Operator",
                value: parts.op,
                onChange: (e) => {
                  const op = e.target.value;
                  const text = operandText(parts.op, parts.operand);
                  rebuild(entries.map((x, j) => (j === i ? [x[0], { [op]: operandValue(op, text) }] : x)));
                },
              },
              OPERATORS.map((op) => h("option", { key: op, value: op }, op)),
            )
          : null,
        parts
          ? h(TextInput, {
              value: operandText(parts.op, parts.operand),
              label: "Value",
              placeholder: parts.op === "equals" ? "JSON, or text" : parts.op === "matches" ? "regular expression" : "command words",
              onChange: (text) => rebuild(entries.map((x, j) => (j === i ? [x[0], { [parts.op]: operandValue(parts.op, text) }] : x))),
            })
          : h("code", { className: "ag-kept" }, `${JSON.stringify(constraint)} (kept as is)`),
        h("button", { type: "button", className: "ag-button ag-button--quiet", onClick: () => rebuild(entries.filter((_, j) => j !== i)) }, "Remove"),
        error ? h("p", { className: "ag-error", role: "alert" }, error) : null,
      );
    }),
    h(
      "button",
      { type: "button", className: "ag-button", "data-action": "add-constraint", onClick: () => rebuild([...entries, ["", { prefix: "" }]]) },
      "Add an argument constraint",
    ),
  );
}

function ProbeList({ probes, onChange, label }) {
  const items = Array.isArray(probes) ? probes : [];
  return h(
    "div",
    { className: "ag-list" },
    h("span", { className: "ag-sublabel" }, label),
    items.map((probe, i) =>
      h(
        "div",
        { className: "ag-row", key: i },
        h(TextInput, {
          value: asObject(probe).function_id ?? "",
          label: `${label} ${i + 1}: function`,
          placeholder: "function id",
          onChange: (fid) => onChange(items.map((p, j) => (j === i ? { ...asObject(p), function_id: fid } : p))),
        }),
        h(TextInput, {
          value: asObject(probe).arguments === undefined ? "" : JSON.stringify(asObject(probe).arguments),
          label: `${label} ${i + 1}: arguments`,
          placeholder: "arguments (JSON)",
          onChange: (text) =>
            onChange(
              items.map((p, j) => {
                if (j !== i) return p;
                if (text.trim() === "") return setIn(asObject(p), ["arguments"], undefined);
                return { ...asObject(p), arguments: operandValue("equals", text) };
              }),
            ),
        }),
        h("button", { type: "button", className: "ag-button ag-button--quiet", onClick: () => onChange(items.filter((_, j) => j !== i)) }, "Remove"),
      ),
    ),
    h("button", { type: "button", className: "ag-button", onClick: () => onChange([...items, { function_id: "" }]) }, `Add: ${label.toLowerCase()}`),
  );
}

function RuleCard({ rule, index, count, onChange, onMove, onRemove, errors }) {
  const path = ["rules", index];
  const at = pointer(path);
  const error = errors?.get?.(at);
  let body;
  if (typeof rule === "string") {
    const { action, glob } = shorthand(rule);
    const write = (nextAction, nextGlob) => {
      const short = toShorthand(nextAction, nextGlob);
      onChange(short === null ? { function: nextGlob, action: nextAction } : short);
    };
    body = h(
      Fragment,
      null,
      h(Choice, { options: ACTIONS, value: action, label: `Rule ${index + 1} action`, onChange: (next) => write(next, glob) }),
      h(TextInput, { value: glob, label: `Rule ${index + 1} function`, placeholder: "function id or glob (shell::*)", onChange: (next) => write(action, next) }),
      h(
        "button",
        { type: "button", className: "ag-button ag-button--quiet", "data-action": "expand-rule", onClick: () => onChange({ function: glob, action }) },
        "More options",
      ),
    );
  } else if (isObject(rule)) {
    const set = (key, value) => onChange(setIn(rule, [key], value));
    const isAsk = rule.action === "ask";
    const examples = asObject(rule.examples);
    const setExamples = (key, value) => {
      const next = setIn(examples, [key], value && value.length ? value : undefined);
      set("examples", Object.keys(next).length ? next : undefined);
    };
    body = h(
      Fragment,
      null,
      h(Choice, { options: ACTIONS, value: rule.action, label: `Rule ${index + 1} action`, onChange: (next) => set("action", next) }),
      h(TextInput, { value: rule.function ?? "", label: `Rule ${index + 1} function`, placeholder: "function id or glob (shell::*)", onChange: (next) => set("function", next) }),
      h(
        "div",
        { className: "ag-grid" },
        h(
          Field,
          { label: "Rule id", path: [...path, "rule_id"], errors, hint: "Shown in denials; the shorthand form when empty." },
          h(TextInput, { value: rule.rule_id ?? "", label: "Rule id", placeholder: toShorthand(rule.action, rule.function ?? "") ?? "", onChange: (next) => set("rule_id", next === "" ? undefined : next) }),
        ),
        h(
          Field,
          { label: "Modes", path: [...path, "modes"], errors },
          h(ModesPicker, { value: rule.modes, allowEvery: true, label: `Rule ${index + 1} modes`, onChange: (next) => set("modes", next) }),
        ),
      ),
      h(
        Field,
        { label: "Argument constraints", path: [...path, "args"], errors, hint: "Every constraint must hold. prefix and runs match commands word by word; matches is a regular expression; equals compares JSON." },
        h(ArgsEditor, { args: rule.args, path: [...path, "args"], errors, onChange: (next) => set("args", next) }),
      ),
      isAsk || rule.timeout_ms !== undefined || rule.escalate_after_ms !== undefined
        ? h(
            "div",
            { className: "ag-grid" },
            h(
              Field,
              { label: "Deny after (ms)", path: [...path, "timeout_ms"], errors, hint: "Ask rules only; at least 1000." },
              h(NumberField, { value: rule.timeout_ms, label: "Deny after", placeholder: "the global deadline", onChange: (next) => set("timeout_ms", next) }),
            ),
            h(
              Field,
              { label: "Escalate after (ms)", path: [...path, "escalate_after_ms"], errors, hint: "Ask rules only; at least 1000." },
              h(NumberField, { value: rule.escalate_after_ms, label: "Escalate after", placeholder: "the global escalation", onChange: (next) => set("escalate_after_ms", next) }),
            ),
          )
        : null,
      h(
        "details",
        { className: "ag-examples" },
        h("summary", null, "Examples checked at every compile"),
        h(ProbeList, { probes: examples.match, label: "Must match", onChange: (next) => setExamples("match", next) }),
        h(ProbeList, { probes: examples.no_match, label: "Must not match", onChange: (next) => setExamples("no_match", next) }),
      ),
    );
  } else {
    body = h("code", { className: "ag-kept" }, `${JSON.stringify(rule)} (not a rule; kept as is)`);
  }
  return h(
    "li",
    { className: error ? "ag-rule ag-field--error" : "ag-rule", "data-field": at, "data-rule": index },
    h(
      "div",
      { className: "ag-rule__head" },
      h("span", { className: "ag-rule__number" }, `Rule ${index + 1}`),
      h(
        "span",
        { className: "ag-rule__tools" },
        h("button", { type: "button", className: "ag-button ag-button--quiet", disabled: index === 0, "aria-label": `Move rule ${index + 1} up`, onClick: () => onMove(-1) }, "Up"),
        h("button", { type: "button", className: "ag-button ag-button--quiet", disabled: index === count - 1, "aria-label": `Move rule ${index + 1} down`, onClick: () => onMove(1) }, "Down"),
        h("button", { type: "button", className: "ag-button ag-button--quiet", "aria-label": `Remove rule ${index + 1}`, onClick: onRemove }, "Remove"),
      ),
    ),
    body,
    error ? h("p", { className: "ag-error", role: "alert" }, error) : null,
  );
}

function RulesEditor({ value, onChange, errors }) {
  const rules = Array.isArray(value) ? value : DEFAULT_RULES;
  const write = (next) => onChange(next);
  return h(
    Fragment,
    null,
    Array.isArray(value) ? null : h("p", { className: "ag-hint" }, "Not set: the built-in rules below apply. Editing them sets the field."),
    h(
      "ol",
      { className: "ag-rules" },
      rules.map((rule, i) =>
        h(RuleCard, {
          key: i,
          rule,
          index: i,
          count: rules.length,
          errors,
          onChange: (next) => write(rules.map((r, j) => (j === i ? next : r))),
          onRemove: () => write(rules.filter((_, j) => j !== i)),
          onMove: (step) => {
            const to = i + step;
            if (to < 0 || to >= rules.length) return;
            const next = [...rules];
            [next[i], next[to]] = [next[to], next[i]];
            write(next);
          },
        }),
      ),
    ),
    h(
      "button",
      { type: "button", className: "ag-button", "data-action": "add-rule", onClick: () => write([...rules, { function: "", action: "ask" }]) },
      "Add a rule",
    ),
  );
}

// ---------------------------------------------------------------------------
// The draft check

function DraftCheck({ host, value }) {
  const [state, setState] = useState({ phase: "idle" });
  const serial = useRef(0);
  const judged = useMemo(() => judgeable(value), [value]);
  const key = useMemo(() => JSON.stringify(judged.config), [judged]);
  useEffect(() => {
    const mine = ++serial.current;
    setState((s) => ({ ...s, phase: "waiting" }));
    const timer = setTimeout(async () => {
      setState((s) => ({ ...s, phase: "checking" }));
      try {
        const answer = await host.iii.trigger("approval::simulate", { config: judged.config, from_pending: true }, { timeoutMs: 15000 });
        if (mine !== serial.current) return;
        const results = Array.isArray(answer?.results) ? answer.results : [];
        setState({
          phase: "done",
          ruleErrors: Array.isArray(answer?.rule_errors) ? answer.rule_errors : [],
          held: results.length,
          changed: results.filter((r) => r.changed),
        });
      } catch (error) {
        if (mine !== serial.current) return;
        setState({ phase: "refused", message: failure(error) });
      }
    }, SIMULATE_DEBOUNCE_MS);
    return () => clearTimeout(timer);
  }, [key]);
  let body;
  if (state.phase === "refused") {
    body = h("p", { className: "ag-check__bad", "data-check": "refused" }, `The worker would refuse this value: ${state.message}`);
  } else if (state.phase === "done" && state.ruleErrors.length > 0) {
    body = h(
      Fragment,
      null,
      h("p", { className: "ag-check__bad", "data-check": "rule-errors" }, "Rule errors: the worker would refuse this value whole and keep the configuration in force."),
      h("ul", { className: "ag-check__list" }, state.ruleErrors.map((e, i) => h("li", { key: i }, visible(e)))),
    );
  } else if (state.phase === "done") {
    body = h(
      Fragment,
      null,
      h(
        "p",
        { className: state.changed.length ? "ag-check__warn" : "ag-check__ok", "data-check": state.changed.length ? "changes" : "no-change" },
        state.held === 0
          ? "No held call to judge; the rules compile."
          : state.changed.length === 0
            ? `The rules compile. None of the ${state.held} held calls would be judged differently.`
            : `The rules compile. ${state.changed.length} of the ${state.held} held calls would be judged differently:`,
      ),
      state.changed.length
        ? h(
            "ul",
            { className: "ag-check__list" },
            state.changed.map((r, i) =>
              h(
                "li",
                { key: i, "data-changed": `${r.session_id ?? ""}/${r.function_call_id ?? r.id ?? ""}` },
                h("code", null, visible(r.function_id)),
                ` ${r.verdict_now} → ${r.verdict_draft}`,
                r.rule_id_draft ? ` (rule ${visible(r.rule_id_draft)})` : "",
              ),
            ),
          )
        : null,
    );
  } else {
    body = h("p", { className: "ag-hint", "data-check": "checking" }, "Checking the draft with the worker…");
  }
  return h(
    "aside",
    { className: "ag-check", "aria-live": "polite" },
    h("h3", { className: "ag-section__title" }, "Before you save"),
    body,
    judged.unresolved.length
      ? h("p", { className: "ag-hint" }, `Judged at their defaults (set from the environment with no default): ${judged.unresolved.join(", ")}.`)
      : null,
  );
}

// ---------------------------------------------------------------------------
// The configuration form

function ErrorSummary({ errors }) {
  const entries = errors && typeof errors.entries === "function" ? Array.from(errors.entries()) : [];
  if (entries.length === 0) return null;
  return h(
    "div",
    { className: "ag-summary", role: "alert" },
    h("strong", null, "Check these fields before saving"),
    h("ul", null, entries.map(([at, message]) => h("li", { key: at }, h("code", null, at || "/"), ` ${message}`))),
  );
}

function ConfigForm(props) {
  const { host, value, onChange, errors, focusField } = props;
  const root = asObject(value);
  const ref = useRef(null);
  const set = useCallback((path, next) => onChange(setIn(root, path, next)), [root, onChange]);
  const field = (key) => root[key];

  useEffect(() => {
    if (!Array.isArray(focusField) || focusField.length === 0 || !ref.current) return;
    const at = pointer(focusField);
    const found = Array.from(ref.current.querySelectorAll("[data-field]")).find((el) => el.getAttribute("data-field") === at);
    if (found) {
      found.scrollIntoView({ block: "center" });
      found.querySelector("input, select, textarea, button")?.focus();
    }
  }, [focusField]);

  const unknown = Object.keys(root).filter((k) => !KNOWN_FIELDS.includes(k));
  const reviewer = field("reviewer");
  const links = field("links");
  const log = field("decision_log");
  const num = (key, label, hint, placeholder) =>
    h(Field, { label, hint, path: [key], errors }, h(NumberField, { value: field(key), label, placeholder, onChange: (next) => set([key], next) }));
  const later = (key, label, hint, editor) =>
    h(
      Field,
      { label, hint, path: [key], errors },
      field(key) === undefined
        ? h(
            "div",
            { className: "ag-row" },
            h("span", { className: "ag-hint" }, "Not set: the worker's default applies."),
            h("button", { type: "button", className: "ag-button", "data-action": `set-${key}`, onClick: () => set([key], editor.start) }, "Set"),
          )
        : h(
            Fragment,
            null,
            editor.render(field(key), (next) => set([key], next)),
            h("button", { type: "button", className: "ag-button ag-button--quiet", onClick: () => set([key], undefined) }, "Use the default"),
          ),
    );

  return h(
    "div",
    { className: "ag-form", ref },
    h(ErrorSummary, { errors }),
    h(
      "div",
      { className: "ag-form__columns" },
      h(
        "div",
        { className: "ag-form__main" },
        h(
          Section,
          { title: "Policy", id: "ag-policy" },
          h(
            Field,
            { label: "Default mode", path: ["default_mode"], errors, hint: "The mode of sessions nobody set one for. manual: calls no rule allows wait for a human; auto: the session's allow list is honoured; full: every call runs except the human-only ones." },
            h(Choice, { options: MODES, value: field("default_mode") ?? "manual", label: "Default mode", onChange: (next) => set(["default_mode"], next) }),
          ),
          h(
            Field,
            { label: "Rule precedence", path: ["rule_precedence"], errors, hint: "first_match: the first matching rule decides. deny_ask_allow: any matching deny wins, then ask, then allow." },
            h(Choice, {
              options: ["first_match", "deny_ask_allow"],
              value: field("rule_precedence") ?? "first_match",
              label: "Rule precedence",
              onChange: (next) => set(["rule_precedence"], next === "first_match" && field("rule_precedence") === undefined ? undefined : next),
            }),
          ),
          num("grant_reask_limit", "Folder prompts per held call", "How many times one call may ask for a folder before the watch stands down (0: never).", "3"),
          h(
            Field,
            { label: "Human-only functions", path: ["human_only_extra"], errors, hint: "Globs only a human may call, on top of the built-in ones nothing removes." },
            h(StringList, { value: field("human_only_extra"), label: "Human-only glob", placeholder: "billing::*", addLabel: "Add a glob", onChange: (next) => set(["human_only_extra"], next.length ? next : undefined) }),
          ),
        ),
        h(
          Section,
          { title: "Rules", id: "ag-rules", intro: "Ask rules hold a call for a human wherever they stand, in every mode. Allow and deny rules are read top to bottom, after the session's mode and grants (with deny_ask_allow, any deny first). A call nothing decides waits for a human." },
          h(RulesEditor, { value: field("rules"), errors, onChange: (next) => set(["rules"], next) }),
        ),
        h(
          Section,
          { title: "Held calls", id: "ag-holds" },
          h(
            "div",
            { className: "ag-grid" },
            num("pending_timeout_ms", "Deny unanswered holds after (ms)", "Empty: a hold waits until someone answers or its turn ends.", "never"),
            num("escalate_after_ms", "Escalate unanswered holds after (ms)", "Fires approval::pending-escalated. Empty: never.", "never"),
            num("release_timeout_ms", "Wait for the harness (ms)", "How long a decision waits for the harness to run the call.", "1800000"),
            num("resolve_wait_ms", "Answer the decider within (ms)", "Past it the decider hears 'under way' and the outcome follows as an event.", "8000"),
          ),
        ),
        h(
          Section,
          { title: "Reviewer", id: "ag-reviewer", intro: "An automated reviewer asked about calls that would otherwise wait for a human by default." },
          h(Toggle, {
            label: "Ask a reviewer",
            id: "ag-reviewer-on",
            checked: isObject(reviewer),
            onChange: (on) => set(["reviewer"], on ? { function_id: "", modes: ["auto"] } : undefined),
          }),
          isObject(reviewer)
            ? h(
                "div",
                { className: "ag-grid" },
                h(
                  Field,
                  { label: "Reviewer function", path: ["reviewer", "function_id"], errors },
                  h(TextInput, { value: reviewer.function_id ?? "", label: "Reviewer function", placeholder: "review::call", onChange: (next) => set(["reviewer", "function_id"], next) }),
                ),
                h(
                  Field,
                  { label: "Reviewed modes", path: ["reviewer", "modes"], errors },
                  h(ModesPicker, { value: reviewer.modes ?? ["auto"], label: "Reviewed modes", onChange: (next) => set(["reviewer", "modes"], next) }),
                ),
                h(
                  Field,
                  { label: "Wait for it (ms)", path: ["reviewer", "timeout_ms"], errors, hint: "At most 3000 is used." },
                  h(NumberField, { value: reviewer.timeout_ms, label: "Reviewer wait", placeholder: "4000", onChange: (next) => set(["reviewer", "timeout_ms"], next) }),
                ),
                h(
                  Field,
                  { label: "Denials in a row before a human decides", path: ["reviewer", "max_consecutive_denials"], errors },
                  h(NumberField, { value: reviewer.max_consecutive_denials, label: "Denials in a row", placeholder: "3", onChange: (next) => set(["reviewer", "max_consecutive_denials"], next) }),
                ),
                h(
                  Field,
                  { label: "Denials per 50 reviews before a human decides", path: ["reviewer", "max_denials_per_50"], errors },
                  h(NumberField, { value: reviewer.max_denials_per_50, label: "Denials per 50", placeholder: "10", onChange: (next) => set(["reviewer", "max_denials_per_50"], next) }),
                ),
              )
            : null,
        ),
        h(
          Section,
          { title: "Approval links", id: "ag-links", intro: "A signed link per held call, and an inbox page, served through the engine's HTTP port." },
          h(Toggle, {
            label: "Serve approval links",
            id: "ag-links-on",
            checked: isObject(links),
            onChange: (on) => set(["links"], on ? { secret: "${APPROVAL_LINK_SECRET}", public_base_url: "" } : undefined),
          }),
          isObject(links)
            ? h(
                "div",
                { className: "ag-grid" },
                h(Field, { label: "Signing secret", path: ["links", "secret"], errors, hint: "At least 32 characters; rotating it voids every link." }, h(SecretField, { value: links.secret, label: "signing secret", onChange: (next) => set(["links", "secret"], next) })),
                h(
                  Field,
                  { label: "Public base URL", path: ["links", "public_base_url"], errors, hint: "Where a browser reaches the engine's HTTP port." },
                  h(TextInput, { value: links.public_base_url ?? "", label: "Public base URL", placeholder: "https://gate.example", onChange: (next) => set(["links", "public_base_url"], next) }),
                ),
                h(Field, { label: "Inbox token", path: ["links", "inbox_token"], errors, hint: "Without one the inbox page answers 404." }, h(SecretField, { value: links.inbox_token, label: "inbox token", optional: true, onChange: (next) => set(["links", "inbox_token"], next) })),
              )
            : null,
        ),
        h(
          Section,
          { title: "Decision log", id: "ag-log", intro: "One record per verdict and per decision, sent to a function of your choice." },
          h(Toggle, {
            label: "Send a decision log",
            id: "ag-log-on",
            checked: isObject(log),
            onChange: (on) => set(["decision_log"], on ? { function_id: "" } : undefined),
          }),
          isObject(log)
            ? h(
                "div",
                { className: "ag-grid" },
                h(Field, { label: "Log function", path: ["decision_log", "function_id"], errors }, h(TextInput, { value: log.function_id ?? "", label: "Log function", placeholder: "audit::record", onChange: (next) => set(["decision_log", "function_id"], next) })),
                h(Field, { label: "Queue (records)", path: ["decision_log", "queue"], errors, hint: "Past it the oldest record is dropped." }, h(NumberField, { value: log.queue, label: "Queue", placeholder: "10000", onChange: (next) => set(["decision_log", "queue"], next) })),
              )
            : null,
        ),
        h(
          Section,
          { title: "The gate's binding", id: "ag-binding" },
          h(
            "div",
            { className: "ag-grid" },
            num("gate_priority", "Gate priority", "The gate runs after every hook with a lower priority.", "1000"),
            num("binding_check_interval_ms", "Check the binding every (ms)", "At least 1000.", "30000"),
          ),
        ),
        h(
          Section,
          { title: "Commands and protected paths", id: "ag-v4", intro: "Fields of newer workers; each is written only once you set it." },
          later("suggest_prefixes", "Suggested command prefixes", "Programs (and subcommands) a held command may offer to allow for the session.", {
            start: [],
            render: (v, w) => h(StringList, { value: v, label: "Prefix", placeholder: "git status", addLabel: "Add a prefix", onChange: w }),
          }),
          later("protected_paths", "Protected paths", "Globs of files no call may touch without a human.", {
            start: [],
            render: (v, w) => h(StringList, { value: v, label: "Protected path", placeholder: "/opt/iii/**", addLabel: "Add a path", onChange: w }),
          }),
          later("protected_path_functions", "Functions checked for protected paths", null, {
            start: [],
            render: (v, w) => h(StringList, { value: v, label: "Function glob", placeholder: "shell::*", addLabel: "Add a glob", onChange: w }),
          }),
          later("edit_ttl_max_ms", "Longest life of an edited call's grant (ms)", null, {
            start: 3600000,
            render: (v, w) => h(NumberField, { value: v, label: "Edit grant life", placeholder: "3600000", onChange: w }),
          }),
        ),
        unknown.length
          ? h(
              Section,
              { title: "Other fields", id: "ag-other", intro: "This form does not know these fields. They are kept exactly as they are." },
              h("ul", { className: "ag-other" }, unknown.map((k) => h("li", { key: k, "data-field": pointer([k]) }, h("code", null, visible(k))))),
            )
          : null,
      ),
      h("div", { className: "ag-form__side" }, h(DraftCheck, { host, value: root })),
    ),
  );
}

// ---------------------------------------------------------------------------
// The approvals page

const EVENTS = ["approval::pending-created", "approval::pending-escalated", "approval::pending-resolved"];
// The holds a batch may carry (§26.4); any other — an ask rule, a floor, or a
// record written before held_by_rule was kept — is decided one by one.
const BATCHABLE_HOLDS = ["no_match", "reviewer"];
let subscription = 0;

// A held call's key; an unreadable entry may not name its ids.
function keyOf(record) {
  if (typeof record.session_id === "string" && typeof record.function_call_id === "string") {
    return `${record.session_id}/${record.function_call_id}`;
  }
  return `unreadable/${record.scope ?? ""}/${record.error ?? ""}`;
}

// Subscribes `handler` to the worker's held-call events (filtered by
// `config`) for as long as the component is mounted.
function useHeldEvents(host, config, handler) {
  const latest = useRef(handler);
  latest.current = handler;
  const configKey = JSON.stringify(config);
  useEffect(() => {
    const functionId = `iii::${FAMILY}-ui::events::${host.iii.browserId}::${++subscription}`;
    const unlisten = host.iii.on(functionId, (event) => latest.current(event));
    const unbind = EVENTS.map((type) => host.iii.registerTrigger({ type, function_id: functionId, config }));
    return () => {
      for (const off of unbind) if (typeof off === "function") off();
      if (typeof unlisten === "function") unlisten();
    };
  }, [host, configKey]);
}

async function listAll(host, query) {
  const out = [];
  let cursor;
  for (let page = 0; page < 20; page++) {
    const answer = await host.iii.trigger("approval::list-pending", { ...query, limit: 500, ...(cursor ? { cursor } : {}) });
    out.push(...(Array.isArray(answer?.pending) ? answer.pending : []));
    cursor = answer?.next_cursor;
    if (!cursor) break;
  }
  return out;
}

function reviewSummary(review) {
  const said = {
    allow: review.held_because === "clipped" ? "allowed, but saw the arguments clipped: a human decides"
      : review.held_because === "hidden_command" ? "allowed, but part of the command was redacted from it: a human decides"
      : "allowed",
    deny: review.held_because === "breaker" ? "denied, but it has denied too often in a row: a human decides" : "denied",
    escalate: "asked for a human",
    error: "could not be asked (error): a human decides",
    timeout: "did not answer in time: a human decides",
    malformed: "gave an answer it could not read: a human decides",
  }[review.verdict] ?? String(review.verdict);
  return review.risk ? `${said} — risk ${review.risk}` : said;
}

// What redaction writes in place of what it hid (the worker's list): an
// edit made from such a value would run with the mark, so "Edit and allow"
// is offered only for arguments that hold none.
const MARKS = ["<redacted>", "<max-depth>", "<truncated>"];
const CLIP = /\u2026\[\+\d+ chars\]/;

function holdsMark(value) {
  const stack = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === "string") {
      if (MARKS.some((m) => v.includes(m)) || CLIP.test(v)) return true;
    } else if (Array.isArray(v)) {
      stack.push(...v);
    } else if (isObject(v)) {
      for (const [k, item] of Object.entries(v)) {
        if (MARKS.some((m) => k.includes(m)) || CLIP.test(k)) return true;
        stack.push(item);
      }
    }
  }
  return false;
}

function answerText(answer, allowText) {
  if (answer?.resolved) return allowText;
  if (answer?.releasing) return "Under way: the decision is on its way; the outcome follows.";
  if (answer?.not_held) return "Not held any more: the agent stopped waiting before the decision arrived. The call did not run.";
  if (answer?.unknown) return "The agent's answer was lost: no one can tell whether the call ran.";
  return "Nothing changed: the call was already decided or is no longer waiting.";
}

function Facts({ record, now }) {
  const rows = [];
  const row = (label, value, key) => rows.push(h(Fragment, { key: key ?? label }, h("dt", null, label), h("dd", null, value)));
  if (record.session_title) row("Session", visible(record.session_title));
  if (typeof record.session_id === "string") row("Session id", h("code", null, visible(record.session_id)));
  if (typeof record.function_call_id === "string") row("Call id", h("code", null, visible(record.function_call_id)));
  if (record.turn_id) row("Turn", h("code", null, visible(record.turn_id)));
  if (record.pending_at) row("Held since", when(record.pending_at));
  if (typeof record.expires_at === "number") row("Deadline", `${when(record.expires_at)} (${inWords(record.expires_at, now)}) — if no one decides by then, the call is denied.`);
  if (record.escalated_at) row("Escalated", when(record.escalated_at));
  const dir = record.grant_request?.dir ?? record.access_request?.requested_root;
  if (dir) row("Folder", h("code", null, visible(dir)));
  if (isObject(record.runs)) {
    const programs = Array.isArray(record.runs.programs) ? record.runs.programs.map(visible).join(", ") : "";
    row("Runs", `${programs || "(nothing it can name)"}${record.runs.opaque ? ` — opaque${record.runs.why ? `: ${visible(record.runs.why)}` : ""}` : ""}`);
  }
  if (isObject(record.protected_path)) {
    const where = record.protected_path.path ? visible(record.protected_path.path) : "a path that cannot be known";
    row("Protected path", `${where} (matches ${visible(record.protected_path.glob || "")}) — an engine worker's configuration`);
  }
  if (record.held_by_rule) row("Held by", h("code", null, visible(record.held_by_rule)));
  if (isObject(record.review)) {
    row("Reviewer", reviewSummary(record.review));
    if (record.review.rationale) row("Reviewer's reason", visible(record.review.rationale));
  }
  if (record.uncertain) row("Note", "An earlier allow of this call lost its answer: it may have run.");
  return h("dl", { className: "ag-facts" }, rows);
}

// The lives an edit's grant may be given (ms, label), as on the link page;
// the second is the default, and the configuration's edit_ttl_max_ms caps
// whichever is chosen.
const EDIT_TTLS = [
  [60000, "1 minute"],
  [600000, "10 minutes"],
  [3600000, "1 hour"],
];

function HeldCall({ host, record, now, onDecided }) {
  const [whole, setWhole] = useState(null);
  const [reason, setReason] = useState("");
  const [busy, setBusy] = useState(false);
  const [said, setSaid] = useState(null);
  const [draft, setDraft] = useState(null);
  const [ttl, setTtl] = useState(String(EDIT_TTLS[1][0]));
  const reasonId = useId("reason");
  const editId = useId("edit");
  const ttlId = useId("edit-ttl");
  const unreadable = record.kind === "unreadable";
  // Both spellings of a folder prompt (the brief's console, today's).
  const folder = record.kind === "folder_access" || record.kind === "filesystem_access";

  useEffect(() => {
    if (unreadable) return undefined;
    let live = true;
    host.iii
      .trigger("approval::get-pending", { session_id: record.session_id, function_call_id: record.function_call_id })
      .then((answer) => {
        if (live && answer && answer.arguments !== undefined) setWhole(answer);
      })
      .catch(() => {});
    return () => {
      live = false;
    };
  }, [host, record.session_id, record.function_call_id, record.pending_at]);

  const act = async (label, steps, allowText) => {
    setBusy(true);
    setSaid(null);
    try {
      // The decision first; what it remembers only once the harness has
      // confirmed it (contract §20: side effects follow the harness).
      const [[fid, payload], ...after] = steps;
      const answer = await host.iii.trigger(fid, payload, { timeoutMs: 15000 });
      if (answer?.resolved === true && !answer?.unknown) {
        for (const [next, body] of after) await host.iii.trigger(next, body, { timeoutMs: 15000 });
      }
      const text = answerText(answer, allowText);
      setSaid({ ok: Boolean(answer?.resolved), text });
      onDecided(record, label, text);
    } catch (error) {
      setSaid({ ok: false, text: `Failed: ${failure(error)}` });
    } finally {
      setBusy(false);
    }
  };
  const ids = { session_id: record.session_id, function_call_id: record.function_call_id };
  const resolve = (decision, extra = {}) => ["approval::resolve", { ...ids, decision, ...extra }];
  const deny = () => act("deny", [resolve("deny", reason.trim() ? { reason: reason.trim() } : {})], "Denied. The agent has been told.");
  const buttons = [];
  if (!record.releasing && !unreadable && !folder) {
    buttons.push(h("button", { key: "allow", type: "button", className: "ag-button ag-button--allow", "data-decision": "allow", disabled: busy, onClick: () => act("allow", [resolve("allow")], "Allowed. The call goes ahead now.") }, "Allow"));
    buttons.push(
      h(
        "button",
        {
          key: "remember",
          type: "button",
          className: "ag-button",
          "data-decision": "allow-remember",
          disabled: busy,
          onClick: () => act("allow-remember", [resolve("allow"), ["approval::approve-always", { session_id: record.session_id, function_id: record.function_id }]], "Allowed, and this function will not ask again in this session."),
        },
        "Allow and don't ask again in this session",
      ),
    );
    if (typeof record.suggested_prefix === "string" && record.suggested_prefix !== "") {
      buttons.push(
        h(
          "button",
          {
            key: "prefix",
            type: "button",
            className: "ag-button",
            "data-decision": "allow-prefix",
            disabled: busy,
            onClick: () =>
              act(
                "allow-prefix",
                [
                  resolve("allow"),
                  ["approval::approve-always", { session_id: record.session_id, function_id: record.function_id, args: { command: { prefix: record.suggested_prefix } } }],
                ],
                `Allowed, and ${record.suggested_prefix} … runs without asking in this session.`,
              ),
          },
          "Allow ",
          h("code", null, `${visible(record.suggested_prefix)} …`),
          " in this session",
        ),
      );
    }
  }
  if (!record.releasing && folder) {
    for (const [scope, label, hint] of [
      ["once", "Once", "This call may use the folder."],
      ["session", "Session", "Every call in this session may use the folder."],
      ["always", "Always", "The folder is added to the shell's allowed folders for every session."],
    ]) {
      buttons.push(
        h(
          "button",
          { key: scope, type: "button", className: scope === "once" ? "ag-button ag-button--allow" : "ag-button", "data-decision": "allow", "data-scope": scope, title: hint, disabled: busy, onClick: () => act(`allow-${scope}`, [resolve("allow", { grant_scope: scope })], `Allowed (${label.toLowerCase()}). The call runs again with the folder.`) },
          label,
        ),
      );
    }
  }
  const args = whole ? whole.arguments : record.arguments_excerpt;
  const clipped = whole ? whole.arguments_clipped : !unreadable;
  // "Edit and allow" (contract §28): a function hold shown whole, nothing
  // redacted or clipped.
  const editable = !record.releasing && !unreadable && !folder && whole !== null && !clipped && !holdsMark(args);
  const sendEdit = () => {
    let parsed;
    try {
      parsed = JSON.parse(draft ?? pretty(args));
    } catch (error) {
      setSaid({ ok: false, text: "The edited arguments are not JSON. Nothing was sent." });
      return;
    }
    if (!isObject(parsed)) {
      setSaid({ ok: false, text: "The edited arguments must be a JSON object. Nothing was sent." });
      return;
    }
    const ttlMs = Number.parseInt(ttl, 10);
    act("edit", [resolve("edit", { arguments: parsed, ...(ttlMs > 0 ? { ttl_ms: ttlMs } : {}), ...(reason.trim() ? { reason: reason.trim() } : {}) })], "Edited. The agent has been told to make the edited call instead; it runs once when the agent makes it.");
  };
  return h(
    "article",
    { className: record.releasing ? "ag-call ag-call--releasing" : "ag-call", "data-call": keyOf(record), "data-kind": record.kind ?? "function" },
    h(
      "header",
      { className: "ag-call__head" },
      h("code", { className: "ag-call__function" }, visible(record.function_id ?? "(unreadable)")),
      h("span", { className: "ag-badge" }, unreadable ? "unreadable" : folder ? "folder access" : record.releasing ? "running" : "held"),
    ),
    unreadable
      ? h("p", { className: "ag-hint" }, `A stored record that does not parse: ${visible(record.error ?? "")}. Only a denial removes it.`)
      : null,
    h(Facts, { record, now }),
    unreadable
      ? null
      : h(
          "details",
          { className: "ag-args-view", open: true },
          h("summary", null, "Arguments ", h("small", null, clipped ? "(redacted; clipped or excerpt)" : "(redacted; whole)")),
          h("pre", { className: "ag-pre" }, pretty(args)),
        ),
    record.releasing
      ? h("p", { className: "ag-hint" }, "A decision is on its way to the agent; the call may be running.")
      : typeof record.session_id !== "string" || typeof record.function_call_id !== "string"
        ? h("p", { className: "ag-hint" }, "It names no call, so it cannot be decided here.")
        : h(
          "div",
          { className: "ag-decide" },
          buttons,
          editable
            ? h(
                "details",
                { className: "ag-edit" },
                h("summary", null, "Edit and allow"),
                h("label", { className: "ag-label", htmlFor: editId }, "Arguments (JSON): the agent is told to make this call instead, and it runs once"),
                h("textarea", { id: editId, name: "arguments", className: "ag-textarea", rows: 6, spellCheck: false, value: draft ?? pretty(args), onChange: (e) => setDraft(e.target.value) }),
                h("label", { className: "ag-label", htmlFor: ttlId }, "The agent may make the edited call within (the configured edit_ttl_max_ms shortens it)"),
                h(
                  "select",
                  { id: ttlId, name: "ttl_ms", className: "ag-select", value: ttl, onChange: (e) => setTtl(e.target.value) },
                  EDIT_TTLS.map(([ms, label]) => h("option", { key: ms, value: String(ms) }, label)),
                ),
                h("button", { type: "button", className: "ag-button ag-button--allow", "data-decision": "edit", disabled: busy, onClick: sendEdit }, "Send the edited call"),
              )
            : null,
          h("label", { className: "ag-label", htmlFor: reasonId }, "Reason for denying or editing (optional, the agent sees it)"),
          h("textarea", { id: reasonId, name: "reason", className: "ag-textarea", rows: 2, maxLength: 2000, value: reason, onChange: (e) => setReason(e.target.value) }),
          h("button", { type: "button", className: "ag-button ag-button--deny", "data-decision": "deny", disabled: busy, onClick: deny }, "Deny"),
        ),
    said ? h("p", { className: said.ok ? "ag-said ag-said--ok" : "ag-said", role: "status" }, said.text) : null,
  );
}

function TurnBatch({ host, calls, separate, onDecided }) {
  const [busy, setBusy] = useState(false);
  const [said, setSaid] = useState(null);
  const first = calls[0];
  const allowAll = async () => {
    setBusy(true);
    try {
      const answer = await host.iii.trigger(
        "approval::resolve-batch",
        { session_id: first.session_id, turn_id: first.turn_id, decision: "allow", items: calls.map((c) => ({ function_call_id: c.function_call_id, pending_at: c.pending_at })) },
        { timeoutMs: 20000 },
      );
      const results = Array.isArray(answer?.results) ? answer.results : [];
      const skipped = Array.isArray(answer?.skipped) ? answer.skipped : [];
      const text = `Allowed ${results.filter((r) => r.resolved).length} of ${calls.length}${skipped.length ? `; left alone: ${skipped.map((s) => `${s.function_call_id} (${s.why})`).join(", ")}` : ""}.`;
      setSaid(text);
      onDecided(first, "allow-all", text);
    } catch (error) {
      setSaid(`Failed: ${failure(error)}`);
    } finally {
      setBusy(false);
    }
  };
  return h(
    "div",
    { className: "ag-batch", "data-batch": `${first.session_id}/${first.turn_id}` },
    h("button", { type: "button", className: "ag-button ag-button--allow", "data-decision": "allow-all", disabled: busy, onClick: allowAll }, `Allow all ${calls.length} held calls of this turn`),
    h("ul", { className: "ag-batch__calls", "aria-label": "The calls Allow all covers" }, calls.map((c) => h("li", { key: keyOf(c) }, h("code", null, visible(c.function_id)), " ", h("small", null, visible(c.function_call_id))))),
    separate.length
      ? h(
          "p",
          { className: "ag-hint", "data-separate": separate.map((c) => c.function_call_id).join(" ") },
          "Decide separately (not in the batch): ",
          separate.map((c, i) => h(Fragment, { key: keyOf(c) }, i ? ", " : "", h("code", null, visible(c.function_id)), " ", h("small", null, visible(c.function_call_id)))),
        )
      : null,
    said ? h("p", { className: "ag-said", role: "status" }, said) : null,
  );
}

function ApprovalsPage({ host }) {
  const [records, setRecords] = useState(() => new Map());
  const [loading, setLoading] = useState({ phase: "loading" });
  const [recent, setRecent] = useState([]);
  const [now, setNow] = useState(() => Date.now());
  const resolvedSince = useRef(null);

  const note = useCallback((record, label, text) => {
    setRecent((r) => [{ key: `${keyOf(record)}#${Date.now()}`, function_id: record.function_id, call: record.function_call_id, label, text }, ...r].slice(0, 20));
  }, []);

  useHeldEvents(host, {}, (event) => {
    if (!isObject(event) || typeof event.session_id !== "string" || typeof event.function_call_id !== "string") return;
    const key = keyOf(event);
    if (typeof event.outcome === "string") {
      if (resolvedSince.current) resolvedSince.current.add(key);
      setRecords((m) => {
        if (!m.has(key)) return m;
        const next = new Map(m);
        next.delete(key);
        return next;
      });
      setRecent((r) => [{ key: `${key}#${Date.now()}`, function_id: event.function_id, call: event.function_call_id, label: "outcome", text: `Outcome: ${event.outcome}${event.reason ? ` (${visible(event.reason)})` : ""}` }, ...r].slice(0, 20));
    } else {
      setRecords((m) => new Map(m).set(key, event));
    }
  });

  const load = useCallback(async () => {
    resolvedSince.current = new Set();
    setLoading({ phase: "loading" });
    try {
      const listed = await listAll(host, {});
      const gone = resolvedSince.current;
      resolvedSince.current = null;
      setRecords((m) => {
        const next = new Map();
        for (const record of listed) if (isObject(record) && !gone.has(keyOf(record))) next.set(keyOf(record), record);
        // Events that arrived while listing are newer than the list.
        for (const [key, record] of m) if (!next.has(key) && !gone.has(key)) next.set(key, record);
        return next;
      });
      setLoading({ phase: "ready" });
    } catch (error) {
      resolvedSince.current = null;
      setLoading({ phase: "error", message: failure(error) });
    }
  }, [host]);

  useEffect(() => {
    load();
    const tick = setInterval(() => setNow(Date.now()), 15000);
    const off = typeof host.iii.addConnectionStateListener === "function"
      ? host.iii.addConnectionStateListener((state) => {
          if (state === "connected" || state?.connected === true) load();
        })
      : null;
    return () => {
      clearInterval(tick);
      if (typeof off === "function") off();
    };
  }, [load]);

  // Held calls grouped by session and turn, oldest first.
  const groups = useMemo(() => {
    const sorted = Array.from(records.values()).sort((a, b) => (a.pending_at ?? 0) - (b.pending_at ?? 0) || keyOf(a).localeCompare(keyOf(b)));
    const byTurn = new Map();
    for (const record of sorted) {
      const turn = `${record.session_id}\u0000${record.turn_id ?? ""}`;
      if (!byTurn.has(turn)) byTurn.set(turn, []);
      byTurn.get(turn).push(record);
    }
    return Array.from(byTurn.values());
  }, [records]);

  return h(
    "div",
    { className: "ag-page" },
    h(
      "header",
      { className: "ag-page__head" },
      h("h2", { className: "ag-page__title" }, "Approvals"),
      h("span", { className: "ag-page__count", "data-held": records.size }, loading.phase === "loading" ? "Loading…" : `${records.size} held`),
      h("button", { type: "button", className: "ag-button ag-button--quiet", onClick: load }, "Refresh"),
    ),
    loading.phase === "error" ? h("p", { className: "ag-error", role: "alert" }, `Could not list held calls: ${loading.message}`) : null,
    loading.phase !== "loading" && records.size === 0 ? h("p", { className: "ag-empty" }, "Nothing is waiting for a decision.") : null,
    groups.map((calls) => {
      const first = calls[0];
      const functionCalls = calls.filter((c) => (c.kind ?? "function") === "function" && !c.releasing);
      const batchable = functionCalls.filter((c) => BATCHABLE_HOLDS.includes(c.held_by_rule));
      const separate = functionCalls.filter((c) => !batchable.includes(c));
      return h(
        "section",
        { key: `${first.session_id}/${first.turn_id}`, className: "ag-turn", "data-turn": `${first.session_id}/${first.turn_id ?? ""}` },
        h(
          "h3",
          { className: "ag-turn__title" },
          first.session_title ? visible(first.session_title) : h("code", null, visible(first.session_id ?? "(no session)")),
          first.turn_id ? h("small", null, ` · turn ${visible(first.turn_id)}`) : null,
        ),
        batchable.length >= 2 ? h(TurnBatch, { host, calls: batchable, separate, onDecided: note }) : null,
        calls.map((record) => h(HeldCall, { key: `${keyOf(record)}@${record.pending_at}`, host, record, now, onDecided: note })),
      );
    }),
    recent.length
      ? h(
          "section",
          { className: "ag-recent", "aria-label": "Recent decisions" },
          h("h3", { className: "ag-turn__title" }, "Recent"),
          h("ul", null, recent.map((r) => h("li", { key: r.key, "data-call": r.call, "data-label": r.label }, h("code", null, visible(r.function_id ?? "")), " ", h("small", null, visible(r.call ?? "")), " — ", r.text))),
        )
      : null,
  );
}

// ---------------------------------------------------------------------------
// The session chip

function ModeChip({ host, sessionId }) {
  const [mode, setMode] = useState(null);
  const [held, setHeld] = useState(null);
  const [error, setError] = useState(null);
  const valid = typeof sessionId === "string" && sessionId !== "" && !sessionId.includes("/");

  const count = useCallback(async () => {
    if (!valid) return;
    try {
      const listed = await listAll(host, { session_id: sessionId });
      setHeld(listed.filter((r) => r.kind !== "unreadable").length);
    } catch {
      setHeld(null);
    }
  }, [host, sessionId, valid]);

  useEffect(() => {
    if (!valid) return;
    let live = true;
    host.iii
      .trigger("approval::get-settings", { session_id: sessionId })
      .then((answer) => live && setMode(answer?.settings?.mode ?? null))
      .catch((e) => live && setError(failure(e)));
    count();
    return () => {
      live = false;
    };
  }, [host, sessionId, valid, count]);

  useHeldEvents(host, valid ? { session_id: sessionId } : {}, () => {
    if (valid) count();
  });

  if (!valid) return null;
  const choose = async (next) => {
    setError(null);
    try {
      const answer = await host.iii.trigger("approval::set-mode", { session_id: sessionId, mode: next });
      setMode(answer?.settings?.mode ?? next);
    } catch (e) {
      setError(failure(e));
    }
  };
  return h(
    "span",
    { className: "ag-chip", "data-session": sessionId, title: error ? `approval-gate: ${error}` : "Approvals for this session" },
    h(
      "select",
      { className: "ag-chip__mode", "aria-label": "Approval mode of this session", value: mode ?? "", disabled: mode === null, onChange: (e) => choose(e.target.value) },
      mode === null ? h("option", { value: "" }, "…") : null,
      MODES.map((m) => h("option", { key: m, value: m }, m)),
    ),
    held ? h("span", { className: "ag-chip__held", "data-held": held }, `${held} held`) : null,
    error ? h("span", { className: "ag-chip__error", role: "alert" }, "!") : null,
  );
}

// ---------------------------------------------------------------------------

export default function setup(host) {
  const removers = [];
  const Form = (props) => h(ConfigForm, { ...props, host });
  removers.push(host.configForms.register(FAMILY, Form, { layout: "full" }));
  removers.push(
    host.pages.register({
      id: "approvals",
      title: "Approvals",
      configurationId: FAMILY,
      render: (props) => h(ApprovalsPage, { ...props, host }),
    }),
  );
  if (host.chat && typeof host.chat.registerSessionChip === "function") {
    removers.push(
      host.chat.registerSessionChip({
        id: "approval-gate-mode",
        render: ({ sessionId }) => h(ModeChip, { host, sessionId }),
      }),
    );
  }
  return () => {
    for (const remove of removers) if (typeof remove === "function") remove();
  };
}

// The pure parts, for the extension's own tests.
export const internals = { setIn, getIn, pointer, judgeable, shorthand, toShorthand, visible, operandValue, operandText };
