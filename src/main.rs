//! `approval-gate`: the worker binary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use approval_gate::{
    boot, config_id_from_env, load_seed, log_allowed, log_filter, manifest_json, render_table,
    signal, simulate_offline, standing_by, unbind, ApprovalConfig, BootOptions, RedactingStderr,
    SimCall, DEFAULT_STANDBY_RETRY, NAME_CONFIRM_WINDOW, RECONCILE_AGE,
};

/// Exit status when the engine refused this instance after boot: a
/// reconnect found the worker name taken by another instance (a standby
/// that took over while this one's connection was down). The SDK never
/// reconnects after that; a supervisor restarts the process, which then
/// stands by behind the new active instance.
const EXIT_NAME_LOST: u8 = 3;

/// `simulate`: nothing changed.
const EXIT_UNCHANGED: u8 = 0;
/// `simulate`: at least one verdict changed.
const EXIT_CHANGED: u8 = 1;
/// `simulate`: the draft (or the current file) has rule errors; it would be
/// refused whole, and the gate would keep the configuration in force.
const EXIT_RULE_ERRORS: u8 = 2;
/// `simulate`: an input could not be read or used (a missing file, YAML or
/// JSON that does not parse, a configuration of the wrong shape, a call
/// without `function_id`), or the command line is wrong.
const EXIT_UNREADABLE: u8 = 4;

/// Human-in-the-loop approval gate for iii function calls.
#[derive(Debug, Parser)]
#[command(name = "approval-gate", version, about, long_about = None)]
struct Cli {
    /// Engine WebSocket URL.
    #[arg(
        long,
        env = "III_URL",
        default_value = "ws://127.0.0.1:49134",
        global = true
    )]
    url: String,
    /// YAML seed for the configuration entry, used only when nothing is stored yet.
    #[arg(long, value_name = "FILE.yaml")]
    config: Option<PathBuf>,
    /// Seconds to wait for the engine at start-up before giving up.
    #[arg(long, default_value_t = 30, value_name = "SECS", global = true)]
    connect_timeout: u64,
    /// While another live approval-gate holds the worker name, try again
    /// every MS milliseconds (this instance stands by, registering nothing,
    /// and takes over when the name is free).
    #[arg(long, default_value_t = DEFAULT_STANDBY_RETRY.as_millis() as u64, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    standby_retry_ms: u64,
    /// Log output format.
    #[arg(long, value_enum, default_value_t = LogFormat::Pretty, global = true)]
    log_format: LogFormat,
    /// Print the registry manifest as JSON and exit without connecting.
    #[arg(long)]
    manifest: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Pretty,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Remove the gate's durable hook bindings from the engine (the only way
    /// to uninstall the gate without denying every call), then exit.
    Unbind,
    /// Compare the gate's verdicts on CALLS under the current configuration
    /// and a draft, offline (no engine; each call judged with each side's
    /// defaults, in its own `mode` when it names one). Exit status: 0 nothing
    /// changed, 1 something changed, 2 rule errors, 4 unreadable input.
    Simulate(SimulateArgs),
}

#[derive(Debug, clap::Args)]
struct SimulateArgs {
    /// The configuration in force (YAML, as a `--config` seed).
    #[arg(long, value_name = "NOW.yaml")]
    current: PathBuf,
    /// The draft configuration (YAML).
    #[arg(long = "config", value_name = "DRAFT.yaml")]
    draft: PathBuf,
    /// The calls: a JSON array of `{id?, session_id?, function_id,
    /// arguments?, mode?}` (or an object with such an array under `calls`).
    #[arg(long, value_name = "CALLS.json")]
    calls: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = SimFormat::Table)]
    format: SimFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum SimFormat {
    Table,
    Json,
}

/// `approval-gate simulate`: reads the three files, compares, prints.
fn simulate(args: &SimulateArgs) -> ExitCode {
    let read_config = |path: &std::path::Path| -> Result<ApprovalConfig, String> {
        let value = load_seed(path).map_err(|e| e.to_string())?;
        ApprovalConfig::from_value(&value).map_err(|e| format!("{}: {e}", path.display()))
    };
    let inputs = (|| {
        let current = read_config(&args.current)?;
        let draft = read_config(&args.draft)?;
        let text = std::fs::read_to_string(&args.calls)
            .map_err(|e| format!("cannot read {}: {e}", args.calls.display()))?;
        let mut value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not JSON: {e}", args.calls.display()))?;
        if let Some(calls) = value.get_mut("calls") {
            value = calls.take();
        }
        let calls: Vec<SimCall> = serde_json::from_value(value)
            .map_err(|e| format!("{}: not a list of calls: {e}", args.calls.display()))?;
        Ok::<_, String>((current, draft, calls))
    })();
    let (current, draft, calls) = match inputs {
        Ok(inputs) => inputs,
        Err(err) => {
            eprintln!("approval-gate simulate: {err}");
            return ExitCode::from(EXIT_UNREADABLE);
        }
    };
    let out = simulate_offline(current, draft, &calls);
    match args.format {
        SimFormat::Table => print!("{}", render_table(&out)),
        SimFormat::Json => match serde_json::to_string_pretty(&out) {
            Ok(json) => println!("{json}"),
            Err(err) => {
                eprintln!("approval-gate simulate: {err}");
                return ExitCode::from(EXIT_UNREADABLE);
            }
        },
    }
    ExitCode::from(if !out.rule_errors.is_empty() {
        EXIT_RULE_ERRORS
    } else if out.changed() > 0 {
        EXIT_CHANGED
    } else {
        EXIT_UNCHANGED
    })
}

fn init_logs(format: LogFormat) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    // A standby's retries each make the SDK log a connect and a refusal;
    // the worker says once that it stands by instead.
    let quiet_standby = tracing_subscriber::filter::filter_fn(|meta| {
        !(standing_by() && meta.target().starts_with("iii_sdk"))
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(log_filter())
        .with_writer(RedactingStderr);
    let never_dumps = tracing_subscriber::filter::filter_fn(log_allowed);
    // A second subscriber cannot be installed in this process; the first wins.
    let _ = match format {
        LogFormat::Pretty => builder
            .finish()
            .with(never_dumps)
            .with(quiet_standby)
            .try_init(),
        LogFormat::Json => builder
            .json()
            .finish()
            .with(never_dumps)
            .with(quiet_standby)
            .try_init(),
    };
}

fn otel_enabled() -> bool {
    !matches!(
        std::env::var("OTEL_ENABLED")
            .map(|v| v.to_ascii_lowercase())
            .as_deref(),
        Ok("false" | "0" | "no" | "off")
    )
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // `simulate` keeps exit status 2 for rule errors: a wrong command
        // line there is an unreadable input.
        Err(err) if err.use_stderr() && std::env::args().any(|a| a == "simulate") => {
            let _ = err.print();
            return ExitCode::from(EXIT_UNREADABLE);
        }
        Err(err) => err.exit(),
    };
    if let Some(Command::Simulate(args)) = &cli.command {
        return simulate(args);
    }
    if cli.manifest {
        println!("{}", manifest_json());
        return ExitCode::SUCCESS;
    }
    init_logs(cli.log_format);
    let timeout = Duration::from_secs(cli.connect_timeout);

    if let Some(Command::Unbind) = cli.command {
        return match unbind(&cli.url, otel_enabled(), timeout).await {
            Ok(removed) => {
                println!("removed {removed} durable binding(s)");
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("approval-gate unbind: {err}");
                ExitCode::FAILURE
            }
        };
    }

    let seed = match cli.config.as_deref().map(load_seed).transpose() {
        Ok(seed) => seed,
        Err(err) => {
            eprintln!("approval-gate: {err}");
            return ExitCode::FAILURE;
        }
    };
    let config_id = match config_id_from_env() {
        Ok(id) => id,
        Err(err) => {
            eprintln!("approval-gate: {err}");
            return ExitCode::FAILURE;
        }
    };
    let options = BootOptions {
        url: cli.url,
        seed,
        connect_timeout: timeout,
        otel: otel_enabled(),
        standby_retry: Duration::from_millis(cli.standby_retry_ms),
        config_id,
        // Never shorter for the binary: the engine's refusal of a taken
        // name can take ~100 ms to arrive (boot.rs, `NAME_CONFIRM_WINDOW`).
        name_confirm: NAME_CONFIRM_WINDOW,
        // Twice the hook timeout the worker binds with (§27.4).
        reconcile_age: RECONCILE_AGE,
    };
    // A standby may wait for hours: a stop signal ends the wait too.
    let booted = tokio::select! {
        booted = boot(options) => booted,
        () = signal() => {
            tracing::info!("stopped before boot completed");
            return ExitCode::SUCCESS;
        }
    };
    let running = match booted {
        Ok(running) => running,
        Err(err) => {
            tracing::error!(error = %err, "boot failed");
            eprintln!("approval-gate: {err}");
            return ExitCode::FAILURE;
        }
    };
    tokio::select! {
        () = signal() => {}
        err = running.stopped() => {
            tracing::error!(
                error = %err,
                exit_code = EXIT_NAME_LOST,
                "the engine refused this instance after a reconnect: another approval-gate holds the worker name now; exiting so a supervisor restarts this one as its standby"
            );
            eprintln!("approval-gate: the engine refused this instance after a reconnect: {err}");
            return ExitCode::from(EXIT_NAME_LOST);
        }
    }
    tracing::info!("shutting down: finishing handlers in flight");
    running.shutdown(Duration::from_secs(10)).await;
    ExitCode::SUCCESS
}
