//! The approval gate, end to end, in one terminal: an agent's calls go
//! through the gate, wait in the inbox, and you decide.
//!
//! Everything runs in this process by default — a test engine, the
//! approval-gate worker, and a harness simulator (the harness double playing
//! today's harness, generation 2, a session manager double, and target
//! functions including a shell that rejects paths outside its jail). With `--url` the same simulator runs
//! against a real engine where approval-gate is already running.
//!
//! ```text
//! cargo run --example playground                                    # asks you at each prompt
//! cargo run --example playground -- --script allow,deny,session     # no questions asked
//! cargo run --example playground -- --url ws://127.0.0.1:49134      # a real engine
//! cargo run --example playground -- --links                         # decide in a browser too
//! ```
//!
//! Walk-through: (1) a call no rule allows is held, the inbox shows it, you
//! allow it and the harness runs it; (2) the same for a call you deny; (3)
//! a shell read outside the session workspace: the shell's jail rejects it
//! and the grant watch turns the rejection into a folder prompt, which you
//! answer once / session / always / deny; (4) what that answer means for the
//! next read in the same folder; (5) a call no one answers: with a short
//! `pending_timeout_ms` set for the step, it is escalated, then denied for
//! want of an answer, and the agent reads why. After each decision the
//! harness's result and the `approval::pending-resolved` event are shown.
//!
//! Decisions (typed, or listed in `--script` in order): `allow`, `deny` (or
//! `deny:<reason>`, typed also `deny <reason>`), and for the folder prompt
//! `once`, `session`, `always` or `deny`. While a prompt waits, a decision
//! made anywhere else — `iii trigger approval::resolve` from another
//! terminal, a console, the approval page — is picked up and the
//! walk-through moves on.
//!
//! With `--links` each hold's approval link is printed: open it in a
//! browser and decide there. In-process, the worker gets a `links`
//! configuration (a fresh secret, or `APPROVAL_LINK_SECRET`) pointing at the
//! test engine's HTTP worker; with `--url`, the running worker's own `links`
//! configuration decides, and the engine must run `iii-http`.

use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use approval_gate::{boot, BootOptions};
use approval_gate_testkit::fixture::{call, plain_client, wait_for_functions, EngineFixture};
use approval_gate_testkit::harness::{CallSpec, CallState, HarnessDouble, HarnessOptions};
use approval_gate_testkit::session::SessionDouble;
use approval_gate_testkit::shell::{Dialect, JailShell};
use approval_gate_testkit::targets::{Behaviour, Echo, TargetWorker};
use clap::Parser;
use iii_sdk::protocol::RegisterTriggerInput;
use iii_sdk::{IIIClient, RegisterFunction};
use serde_json::{json, Value};

/// How long the walk-through waits for an asynchronous effect (an event, a
/// binding, a released call) before saying it did not happen.
const WAIT: Duration = Duration::from_secs(5);

/// Where the folder prompt's file lives: outside every session workspace.
const FOLDER: &str = "/data/reports";

/// Step 5's `pending_timeout_ms` and `escalate_after_ms`.
const UNANSWERED_TIMEOUT_MS: u64 = 3_000;
const UNANSWERED_ESCALATE_MS: u64 = 1_500;

/// Command line.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "playground",
    about = "Walk through the approval gate: a held call, the inbox, your decision, a folder prompt"
)]
pub struct Args {
    /// A real engine's WebSocket URL, with approval-gate already running
    /// against it. Without it, the engine and the worker run in this process.
    #[arg(long)]
    pub url: Option<String>,
    /// Decisions to use instead of asking, in order, comma-separated:
    /// allow, deny, deny:<reason>, and once|session|always|deny for the
    /// folder prompt.
    #[arg(long, value_delimiter = ',', value_name = "DECISIONS")]
    pub script: Option<Vec<String>>,
    /// Print each hold's approval link, to decide it in a browser.
    #[arg(long)]
    pub links: bool,
    /// The simulated session's id (default `play` in-process; against a real
    /// engine `play-<unix seconds>`, so stored settings of an earlier run do
    /// not change this one).
    #[arg(long)]
    pub session: Option<String>,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // The worker's and the doubles' logs go to stderr, warnings only by
    // default, so stdout stays the walk-through.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                // The SDK's deprecation notices and the doubles'
                // shutdown chatter say nothing about the gate.
                tracing_subscriber::EnvFilter::new("warn,iii_sdk=error,approval_gate_testkit=error")
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let decisions = match &args.script {
        Some(script) => Decisions::script(script),
        None => Decisions::terminal(),
    };
    let mut stdout = std::io::stdout();
    match run(args, decisions, &mut stdout).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("playground: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

// ── output ─────────────────────────────────────────────────────────────

/// Prints the walk-through: one short line per thing that happened, tagged
/// with who did it.
pub struct Screen<'a> {
    out: &'a mut (dyn Write + Send),
}

impl Screen<'_> {
    fn say(&mut self, who: &str, text: impl AsRef<str>) {
        let _ = writeln!(self.out, "{who:<8} {}", text.as_ref());
        let _ = self.out.flush();
    }

    fn heading(&mut self, text: &str) {
        let _ = writeln!(self.out, "\n{text}");
        let _ = self.out.flush();
    }

    fn prompt(&mut self, text: &str) {
        let _ = write!(self.out, "{:<8} {text} > ", "decide");
        let _ = self.out.flush();
    }
}

fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// The first text block of a harness result.
fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| compact(result))
}

/// A target error without its tail, `grant_hint=` (the brief's shell) or
/// `filesystem_access_request=` (today's): the grant watch reads the tail; a
/// person reads the sentence.
fn without_hint(text: &str) -> String {
    for tail in ["grant_hint", "filesystem_access_request"] {
        if let Some(at) = text.rfind(&format!(" {tail}=")) {
            return format!("{} (+ {tail})", &text[..at]);
        }
    }
    text.to_string()
}

// ── decisions ──────────────────────────────────────────────────────────

/// What the human answered at a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// Run the call; for a folder prompt, with this grant scope.
    Allow(Option<&'static str>),
    /// Answer the call with a denial; the operator's reason, if given.
    Deny(Option<String>),
}

impl Choice {
    /// Parses `allow`, `deny`, `deny:<reason>` / `deny <reason>`, and for a
    /// folder prompt `once`, `session`, `always`.
    pub fn parse(text: &str, folder: bool) -> Result<Choice, String> {
        let text = text.trim();
        let (word, rest) = match text.find(|c: char| c == ':' || c.is_whitespace()) {
            Some(at) => (&text[..at], text[at + 1..].trim()),
            None => (text, ""),
        };
        let reason = (!rest.is_empty()).then(|| rest.to_string());
        match (word.to_ascii_lowercase().as_str(), folder) {
            ("deny" | "d" | "n" | "no", _) => Ok(Choice::Deny(reason)),
            ("allow" | "a" | "y" | "yes", false) => Ok(Choice::Allow(None)),
            ("allow" | "a" | "y" | "yes" | "once", true) => Ok(Choice::Allow(Some("once"))),
            ("session", true) => Ok(Choice::Allow(Some("session"))),
            ("always", true) => Ok(Choice::Allow(Some("always"))),
            ("once" | "session" | "always", false) => Err(format!(
                "{word:?} is a folder grant scope; this prompt takes allow or deny"
            )),
            _ if folder => Err(format!(
                "{text:?}: answer once, session, always or deny [reason]"
            )),
            _ => Err(format!("{text:?}: answer allow or deny [reason]")),
        }
    }
}

/// Where decisions come from: the terminal, or a `--script` list.
pub enum Decisions {
    /// Lines typed on stdin, read on a thread of their own (a blocking read
    /// must not stall the runtime the doubles run on). `echo` when stdin is
    /// not a terminal, which would have echoed the answer itself.
    Terminal {
        lines: tokio::sync::mpsc::Receiver<String>,
        echo: bool,
    },
    /// Answers given up front, used in order.
    Script(VecDeque<String>),
}

impl Decisions {
    /// Answers read from stdin, one line per prompt.
    pub fn terminal() -> Decisions {
        let (lines, received) = tokio::sync::mpsc::channel(1);
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines().map_while(Result::ok) {
                if lines.blocking_send(line).is_err() {
                    return;
                }
            }
        });
        Decisions::Terminal {
            lines: received,
            echo: !std::io::IsTerminal::is_terminal(&std::io::stdin()),
        }
    }

    /// Answers given up front.
    pub fn script(items: &[String]) -> Decisions {
        Decisions::Script(items.iter().map(|s| s.trim().to_string()).collect())
    }

    /// The next decision; `None` when, while a person was being asked, the
    /// call was resolved by someone else (`released` finished first: an
    /// `iii trigger approval::resolve` from another terminal, say).
    async fn next(
        &mut self,
        screen: &mut Screen<'_>,
        folder: bool,
        released: impl std::future::Future<Output = ()>,
    ) -> Result<Option<Choice>, String> {
        let options = if folder {
            "once | session | always | deny [reason]"
        } else {
            "allow | deny [reason]"
        };
        tokio::pin!(released);
        loop {
            screen.prompt(options);
            let answer = match self {
                Decisions::Script(items) => {
                    let next = items.pop_front();
                    if next.is_none() {
                        let _ = writeln!(screen.out);
                    }
                    let item = next.ok_or_else(|| "--script ran out of decisions (add one more: the walk-through asks up to three times)".to_string())?;
                    let _ = writeln!(screen.out, "{item}   (from --script)");
                    item
                }
                Decisions::Terminal { lines, echo } => {
                    let line = tokio::select! {
                        line = lines.recv() => line,
                        () = &mut released => {
                            let _ = writeln!(screen.out);
                            return Ok(None);
                        }
                    };
                    match line {
                        Some(line) => {
                            if *echo {
                                let _ = writeln!(screen.out, "{line}");
                            }
                            line
                        }
                        None => {
                            let _ = writeln!(screen.out);
                            return Err("stdin closed before a decision; pass --script allow,deny,session to run without a terminal".into());
                        }
                    }
                }
            };
            match Choice::parse(&answer, folder) {
                Ok(choice) => return Ok(Some(choice)),
                Err(why) => match self {
                    Decisions::Script(_) => return Err(format!("--script: {why}")),
                    Decisions::Terminal { .. } => screen.say("", why),
                },
            }
        }
    }
}

// ── the pending-* events ───────────────────────────────────────────────

/// A notification worker in miniature: binds the pending trigger types for
/// the session and keeps what arrives.
struct Events {
    received: Arc<Mutex<Vec<(String, Value)>>>,
}

const ON_CREATED: &str = "playground::on-pending-created";
const ON_RESOLVED: &str = "playground::on-pending-resolved";
const ON_ESCALATED: &str = "playground::on-pending-escalated";

/// The console's bindings: each pending trigger type, for the session.
const BOUND: [(&str, &str); 3] = [
    (ON_CREATED, "approval::pending-created"),
    (ON_RESOLVED, "approval::pending-resolved"),
    (ON_ESCALATED, "approval::pending-escalated"),
];

impl Events {
    async fn bind(console: &IIIClient, session_id: &str) -> Events {
        let received = Arc::new(Mutex::new(Vec::new()));
        for (function_id, trigger_type) in BOUND {
            let sink = received.clone();
            console.register_function(
                function_id,
                RegisterFunction::new_async(move |payload: Value| {
                    let sink = sink.clone();
                    async move {
                        if let Ok(mut events) = sink.lock() {
                            events.push((trigger_type.to_string(), payload));
                        }
                        Ok::<Value, iii_sdk::Error>(json!({"ok": true}))
                    }
                })
                .description("playground: prints approval events"),
            );
        }
        wait_for_functions(console, &[ON_CREATED, ON_RESOLVED, ON_ESCALATED]).await;
        for (function_id, trigger_type) in BOUND {
            // The 0.25 binding API: the engine still speaks it, and the
            // binding goes away with this connection.
            #[allow(deprecated)]
            let _ = console.register_trigger(RegisterTriggerInput::new(
                trigger_type,
                function_id,
                json!({"session_id": session_id}),
            ));
        }
        Events { received }
    }

    /// Waits for the event of `trigger_type` about `call_id`.
    async fn wait(&self, trigger_type: &str, call_id: &str) -> Option<Value> {
        self.wait_for(trigger_type, call_id, WAIT).await
    }

    /// Waits up to `timeout` for the event of `trigger_type` about `call_id`.
    async fn wait_for(
        &self,
        trigger_type: &str,
        call_id: &str,
        timeout: Duration,
    ) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let found = self.received.lock().ok().and_then(|events| {
                events
                    .iter()
                    .find(|(t, e)| t == trigger_type && e["function_call_id"] == call_id)
                    .map(|(_, e)| e.clone())
            });
            if found.is_some() || tokio::time::Instant::now() >= deadline {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

// ── the world ──────────────────────────────────────────────────────────

/// Everything the walk-through talks to.
struct World {
    /// Whether to print each hold's approval link.
    links: bool,
    /// The in-process engine and worker, when not `--url`.
    embedded: Option<(EngineFixture, approval_gate::Running)>,
    harness: HarnessDouble,
    sessions: SessionDouble,
    targets: TargetWorker,
    /// Plays the console: inbox reads, decisions, settings.
    console: IIIClient,
    events: Events,
    session_id: String,
    workspace: String,
}

/// The link secret of an in-process run: `APPROVAL_LINK_SECRET`, else 48
/// random hex characters.
fn link_secret() -> String {
    if let Ok(secret) = std::env::var("APPROVAL_LINK_SECRET") {
        return secret;
    }
    let mut bytes = [0u8; 24];
    if let Ok(mut random) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut random, &mut bytes);
    }
    if bytes.iter().all(|b| *b == 0) {
        // No /dev/urandom: a per-process random hasher key instead.
        use std::hash::{BuildHasher, Hasher};
        for (i, chunk) in bytes.chunks_mut(8).enumerate() {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(i);
            chunk.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Connects a plain SDK client (OpenTelemetry off, name not overridable).
fn connect(url: &str, name: &str) -> IIIClient {
    plain_client(url, name, Some("approval-gate playground".into()))
}

impl World {
    async fn start(args: &Args, screen: &mut Screen<'_>) -> Result<World, String> {
        let (url, fixture) = match &args.url {
            Some(url) => {
                screen.say(
                    "setup",
                    format!("engine: {url} (approval-gate must already run against it)"),
                );
                (url.clone(), None)
            }
            None => {
                let fixture = EngineFixture::start_test().await;
                screen.say(
                    "setup",
                    format!("engine: in-process test engine at {}", fixture.url()),
                );
                (fixture.url(), Some(fixture))
            }
        };
        // The console first: an engine that is not there is a clear message,
        // not a double timing out.
        let console = connect(&url, "playground-console");
        console
            .wait_until_registered(Duration::from_secs(15))
            .await
            .map_err(|e| format!("cannot reach the engine at {url}: {e}"))?;
        // Peers before the worker, so it finds their trigger types at boot.
        let harness = HarnessDouble::start(&url, HarnessOptions::default()).await;
        let sessions = SessionDouble::start(&url).await;
        let shell: Arc<dyn Behaviour> = Arc::new(JailShell::new(Dialect::Shell, &[]));
        let targets = TargetWorker::start_with(
            &url,
            vec![
                (
                    "demo::deploy".to_string(),
                    Arc::new(Echo) as Arc<dyn Behaviour>,
                ),
                ("shell::run".to_string(), shell),
            ],
        )
        .await;

        let embedded = match fixture {
            Some(fixture) => {
                // A shell configuration entry, so an "always" grant has
                // somewhere to persist the folder.
                let _ = call(
                    &console,
                    "configuration::register",
                    json!({"id": "shell", "name": "Shell (playground)", "description": "fs jail roots",
                           "schema": {"type": "object"}, "initial_value": {"fs": {"host_roots": []}}}),
                )
                .await;
                let seed = args.links.then(|| {
                    json!({"links": {"secret": link_secret(), "public_base_url": fixture.http_url()}})
                });
                let running = boot(BootOptions {
                    url: url.clone(),
                    seed,
                    connect_timeout: Duration::from_secs(15),
                    otel: false,
                    ..BootOptions::new(url.clone())
                })
                .await
                .map_err(|e| format!("approval-gate did not boot in-process: {e}"))?;
                screen.say(
                    "setup",
                    "worker: approval-gate booted in-process with the default configuration",
                );
                if args.links {
                    screen.say(
                        "setup",
                        format!(
                            "links: on, served by the test engine's HTTP worker at {}; open a hold's link to decide it in a browser",
                            fixture.http_url()
                        ),
                    );
                }
                Some((fixture, running))
            }
            None => {
                let live = call(
                    &console,
                    "engine::functions::list",
                    json!({"prefix": "approval::"}),
                )
                .await
                .map_err(|e| format!("engine::functions::list failed: {e}"))?;
                let running = live["functions"]
                    .as_array()
                    .is_some_and(|f| f.iter().any(|f| f["function_id"] == "approval::resolve"));
                if !running {
                    return Err(format!("approval-gate is not running against {url}: start it with `approval-gate --url {url}`"));
                }
                screen.say("setup", "worker: approval-gate, already running there");
                None
            }
        };
        for (point, function_id) in [
            ("harness::hook::pre-trigger", "approval::gate"),
            (
                "harness::hook::post-trigger",
                "approval::filesystem-access-watch",
            ),
        ] {
            if harness
                .wait_for_binding(point, function_id, WAIT * 2)
                .await
                .is_none()
            {
                return Err(format!(
                    "the harness never received the {function_id} binding on {point}"
                ));
            }
        }
        screen.say("setup", "harness: the gate is bound to pre-trigger, the grant watch to post-trigger on shell::* / coder::*");
        screen.say(
            "setup",
            "targets: demo::deploy (echoes), shell::run (a shell jailed to the session workspace)",
        );

        let session_id = args.session.clone().unwrap_or_else(|| match &embedded {
            Some(_) => "play".to_string(),
            None => format!(
                "play-{}",
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0)
            ),
        });
        let workspace = format!("/w/{session_id}");
        sessions.put(
            &session_id,
            json!({"title": "Release prep", "metadata": {"owner": "you"}}),
        );
        screen.say(
            "setup",
            format!("session: {session_id} \"Release prep\" (owner: you), workspace {workspace}"),
        );
        let events = Events::bind(&console, &session_id).await;
        match &embedded {
            Some((_, running)) => {
                let deadline = tokio::time::Instant::now() + WAIT;
                while running.event_bindings() < BOUND.len()
                    && tokio::time::Instant::now() < deadline
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            // The worker's side of the binding is not observable from here:
            // give the engine a moment to hand it over.
            None => tokio::time::sleep(Duration::from_millis(500)).await,
        }
        screen.say("setup", format!("console: bound approval::pending-created / pending-resolved / pending-escalated with {{\"session_id\":\"{session_id}\"}}"));
        Ok(World {
            links: args.links,
            embedded,
            harness,
            sessions,
            targets,
            console,
            events,
            session_id,
            workspace,
        })
    }

    async fn rpc(&self, function_id: &str, payload: Value) -> Result<Value, String> {
        call(&self.console, function_id, payload.clone())
            .await
            .map_err(|e| format!("{function_id} {} failed: {e}", compact(&payload)))
    }

    async fn stop(self) {
        self.targets.shutdown().await;
        self.sessions.shutdown().await;
        self.harness.shutdown().await;
        let _ = self.console.shutdown_async().await;
        if let Some((fixture, running)) = self.embedded {
            running.shutdown(Duration::from_secs(2)).await;
            drop(fixture);
        }
    }
}

// ── the walk-through ───────────────────────────────────────────────────

/// Runs the whole walk-through, printing to `out`.
pub async fn run(
    args: Args,
    mut decisions: Decisions,
    out: &mut (dyn Write + Send),
) -> Result<(), String> {
    let mut screen = Screen { out };
    let _ = writeln!(
        screen.out,
        "approval-gate playground: an agent's calls, the gate, and you deciding\n"
    );
    let world = World::start(&args, &mut screen).await?;
    let result = walk(&world, &mut decisions, &mut screen).await;
    if result.is_err() {
        // Leave no held call behind in a real engine's inbox: an ended turn
        // takes its held calls out (outcome aborted).
        world
            .harness
            .complete_turn(&world.session_id, "t1", "cancelled")
            .await;
        screen.say(
            "harness",
            "turn t1 cancelled: its held calls leave the inbox (outcome aborted)",
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    world.stop().await;
    result
}

async fn walk(
    world: &World,
    decisions: &mut Decisions,
    screen: &mut Screen<'_>,
) -> Result<(), String> {
    let sid = world.session_id.as_str();

    screen.heading("1. A call no rule allows waits for a human");
    let spec = world.spec(
        "c1",
        "demo::deploy",
        json!({"env": "staging", "api_key": "sk-live-4242"}),
    );
    world.agent_call(spec, decisions, screen, false).await?;

    screen.heading("2. The same, and you deny it");
    let spec = world.spec("c2", "demo::deploy", json!({"env": "prod"}));
    world.agent_call(spec, decisions, screen, false).await?;

    screen.heading("3. A folder outside the workspace asks for access");
    let grant = json!({"session_id": sid, "function_id": "shell::run"});
    world.rpc("approval::approve-always", grant.clone()).await?;
    screen.say(
        "console",
        format!(
            "approval::approve-always {} → shell::run no longer asks in this session",
            compact(&grant)
        ),
    );
    let spec = world.spec(
        "c3",
        "shell::run",
        json!({"cmd": "cat", "path": format!("{FOLDER}/q3.csv")}),
    );
    let choice = world.agent_call(spec, decisions, screen, true).await?;

    screen.heading("4. The next read in the same folder");
    let spec = world.spec(
        "c4",
        "shell::run",
        json!({"cmd": "cat", "path": format!("{FOLDER}/q4.csv")}),
    );
    match choice {
        Some(Choice::Allow(Some("once"))) => {
            screen.say(
                "note",
                format!(
                    "\"once\" trusted {FOLDER} for that one call: the next read there asks again"
                ),
            );
        }
        Some(_) => {
            world.agent_call(spec, decisions, screen, true).await?;
        }
        None => screen.say(
            "note",
            "no folder prompt was raised above, so there is nothing to show here",
        ),
    }

    screen.heading("5. A call no one answers");
    world.unanswered(screen).await?;

    screen.heading("Done");
    let inbox = world
        .rpc("approval::list-pending", json!({"session_id": sid}))
        .await?;
    let held = inbox["pending"].as_array().map_or(0, Vec::len);
    screen.say(
        "inbox",
        format!("approval::list-pending {{\"session_id\":\"{sid}\"}} → {held} held"),
    );
    world.sessions.delete(sid).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut source = Value::Null;
    while tokio::time::Instant::now() < deadline {
        let settings = world
            .rpc("approval::get-settings", json!({"session_id": sid}))
            .await?;
        source = settings["source"].clone();
        if source == "defaults" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    screen.say(
        "session",
        format!(
            "session::deleted {sid} → the worker dropped its settings (get-settings source: {})",
            source.as_str().unwrap_or("?")
        ),
    );
    Ok(())
}

impl World {
    fn spec(&self, call_id: &str, function_id: &str, arguments: Value) -> CallSpec {
        // Both generations' spellings of the session workspace: today's
        // harness reads `fs_scope.root`, the brief's `working_dir`.
        CallSpec::new(&self.session_id, "t1", call_id, function_id, arguments)
            .with_working_dir(&self.workspace)
            .with_fs_root(&self.workspace)
    }

    /// One agent call: what the gate says, the hold, the inbox, the decision,
    /// the release. Returns the folder decision, when a folder prompt was
    /// answered.
    async fn agent_call(
        &self,
        spec: CallSpec,
        decisions: &mut Decisions,
        screen: &mut Screen<'_>,
        folder_expected: bool,
    ) -> Result<Option<Choice>, String> {
        let (sid, cid, fid) = (
            spec.session_id.clone(),
            spec.call_id.clone(),
            spec.function_id.clone(),
        );
        let why = self
            .rpc(
                "approval::evaluate",
                json!({"session_id": sid, "function_id": fid, "arguments": spec.arguments}),
            )
            .await?;
        screen.say("agent", format!("calls {fid} {}", compact(&spec.arguments)));
        let mut seen = Journal::now(&self.harness);
        let state = self.harness.call(spec).await;
        seen.print(&self.harness, &cid, why["reason"].as_str(), screen);

        let CallState::Held { held_by, .. } = &state else {
            describe(&state, &fid, screen);
            if folder_expected {
                screen.say("note", "no prompt this time");
            }
            return Ok(None);
        };
        let folder = held_by == "approval::filesystem-access-watch";
        match self.events.wait("approval::pending-created", &cid).await {
            Some(e) => {
                let mut text = format!(
                    "approval::pending-created {sid}/{cid} {fid}, kind {}",
                    e["kind"].as_str().unwrap_or("?")
                );
                if let Some(dir) = e["grant_request"]["dir"].as_str() {
                    text.push_str(&format!(", dir {dir}"));
                }
                screen.say("event", text);
                if self.links {
                    match e["approval_url"].as_str() {
                        Some(url) => screen.say("link", format!("{url}   (open it to decide here or in the browser)")),
                        None => screen.say("link", "none: the worker has no links configuration (see README § Approval links)"),
                    }
                }
            }
            None => screen.say(
                "event",
                format!("no approval::pending-created for {cid} within {WAIT:?}"),
            ),
        }
        self.show_inbox(screen).await?;

        let released = async {
            self.harness
                .wait_for_state(&sid, &cid, Duration::from_secs(86_400), |s| !s.is_held())
                .await;
        };
        let decided = decisions.next(screen, folder, released).await?;
        if let Some(choice) = &decided {
            let mut request = json!({"session_id": sid, "function_call_id": cid});
            match choice {
                Choice::Allow(scope) => {
                    request["decision"] = json!("allow");
                    if let Some(scope) = scope {
                        request["grant_scope"] = json!(scope);
                    }
                }
                Choice::Deny(reason) => {
                    request["decision"] = json!("deny");
                    if let Some(reason) = reason {
                        request["reason"] = json!(reason);
                    }
                }
            }
            let reply = self.rpc("approval::resolve", request.clone()).await?;
            screen.say(
                "console",
                format!("approval::resolve {}", compact(&request)),
            );
            screen.say("", format!("→ {}", compact(&reply)));
        } else {
            screen.say(
                "console",
                "someone else resolved it (an approval::resolve from another client)",
            );
        }

        let settled = self
            .harness
            .wait_for_state(&sid, &cid, WAIT, |s| !matches!(s, CallState::Running))
            .await;
        seen.print(&self.harness, &cid, None, screen);
        match settled {
            Some(state) => describe(&state, &fid, screen),
            None => screen.say("harness", format!("{cid} is not settled after {WAIT:?}")),
        }
        let resolved = self.events.wait("approval::pending-resolved", &cid).await;
        match &resolved {
            Some(e) => {
                let mut text = format!(
                    "approval::pending-resolved {sid}/{cid} {fid}, outcome {}",
                    e["outcome"].as_str().unwrap_or("?")
                );
                if let Some(reason) = e["reason"].as_str() {
                    text.push_str(&format!(", reason {reason:?}"));
                }
                screen.say("event", text);
            }
            None => screen.say(
                "event",
                format!("no approval::pending-resolved for {cid} within {WAIT:?}"),
            ),
        }
        // A decision made elsewhere is read back from what it did.
        let choice = decided.unwrap_or_else(|| {
            match resolved.as_ref().and_then(|e| e["outcome"].as_str()) {
                Some("deny") => Choice::Deny(None),
                _ if self.harness.grants(&sid).iter().any(|g| g == FOLDER) => {
                    Choice::Allow(Some("session"))
                }
                _ => Choice::Allow(Some("once")),
            }
        });
        if folder {
            self.show_grants(&choice, screen).await?;
        }
        Ok(folder.then_some(choice))
    }

    /// Step 5: holds end. A short timeout and escalation are set for new
    /// holds (the stored configuration is put back afterwards), a call is
    /// held and no one answers it: it is escalated, then denied for want of
    /// an answer, and the agent reads why.
    async fn unanswered(&self, screen: &mut Screen<'_>) -> Result<(), String> {
        let sid = self.session_id.clone();
        let stored = self
            .rpc(
                "configuration::get",
                json!({"id": "approval-gate", "raw": true}),
            )
            .await?["value"]
            .clone();
        let mut value = match &stored {
            Value::Object(map) => map.clone(),
            _ => serde_json::Map::new(),
        };
        let limits = json!({"pending_timeout_ms": UNANSWERED_TIMEOUT_MS, "escalate_after_ms": UNANSWERED_ESCALATE_MS});
        if let Value::Object(limits) = &limits {
            value.extend(limits.clone());
        }
        self.rpc(
            "configuration::set",
            json!({"id": "approval-gate", "value": value}),
        )
        .await?;
        screen.say(
            "console",
            format!(
                "configuration::set approval-gate + {} → calls held from now on end after 3 s",
                compact(&limits)
            ),
        );
        let result = self.unanswered_call(&sid, screen).await;
        // Put back what was stored, whatever happened above.
        let restored = self
            .rpc(
                "configuration::set",
                json!({"id": "approval-gate", "value": stored}),
            )
            .await;
        match &restored {
            Ok(_) => screen.say(
                "console",
                "configuration::set approval-gate: the stored configuration is back (holds wait for a human again)",
            ),
            Err(err) => screen.say("console", format!("the configuration was not put back: {err}")),
        }
        result.and(restored.map(|_| ()))
    }

    async fn unanswered_call(&self, sid: &str, screen: &mut Screen<'_>) -> Result<(), String> {
        // The worker reloads the configuration on its change event;
        // approval::evaluate says when it has.
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut evaluated = Value::Null;
        while tokio::time::Instant::now() < deadline {
            evaluated = self
                .rpc(
                    "approval::evaluate",
                    json!({"session_id": sid, "function_id": "demo::deploy"}),
                )
                .await?;
            if evaluated["deadline_ms"] == UNANSWERED_TIMEOUT_MS {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        screen.say(
            "console",
            format!("approval::evaluate demo::deploy → {}", compact(&evaluated)),
        );
        let spec = self.spec(
            "c5",
            "demo::deploy",
            json!({"env": "prod", "version": "2.4.1"}),
        );
        screen.say(
            "agent",
            format!("calls demo::deploy {}", compact(&spec.arguments)),
        );
        let state = self.harness.call(spec).await;
        if !state.is_held() {
            describe(&state, "demo::deploy", screen);
            return Err("the call was not held; the expiry cannot be shown".into());
        }
        screen.say("hook", "pre_trigger approval::gate → hold");
        let record = self
            .rpc(
                "approval::get-pending",
                json!({"session_id": sid, "function_call_id": "c5"}),
            )
            .await?;
        let at = |field: &str| {
            let pending_at = record["pending"]["pending_at"].as_u64().unwrap_or(0);
            record["pending"][field]
                .as_u64()
                .map(|t| format!("+{:.1} s", t.saturating_sub(pending_at) as f64 / 1000.0))
                .unwrap_or_else(|| "none".into())
        };
        screen.say(
            "inbox",
            format!(
                "· {sid}/c5 demo::deploy: escalate_at {}, expires_at {} (after pending_at)",
                at("escalate_at"),
                at("expires_at")
            ),
        );
        screen.say("note", "no one decides this time");
        let patience = Duration::from_millis(UNANSWERED_TIMEOUT_MS) + WAIT;
        match self
            .events
            .wait_for("approval::pending-escalated", "c5", patience)
            .await
        {
            Some(_) => screen.say(
                "event",
                format!("approval::pending-escalated {sid}/c5 demo::deploy, still held (a notifier could ask a second approver now)"),
            ),
            None => screen.say("event", "no approval::pending-escalated for c5"),
        }
        let settled = self
            .harness
            .wait_for_state(sid, "c5", patience, |s| {
                !s.is_held() && !matches!(s, CallState::Running)
            })
            .await;
        match settled {
            Some(state) => describe(&state, "demo::deploy", screen),
            None => screen.say("harness", "c5 is not settled"),
        }
        match self.events.wait("approval::pending-resolved", "c5").await {
            Some(e) => screen.say(
                "event",
                format!(
                    "approval::pending-resolved {sid}/c5 demo::deploy, outcome {}, reason {:?}",
                    e["outcome"].as_str().unwrap_or("?"),
                    e["reason"].as_str().unwrap_or("")
                ),
            ),
            None => screen.say("event", "no approval::pending-resolved for c5"),
        }
        Ok(())
    }

    async fn show_inbox(&self, screen: &mut Screen<'_>) -> Result<(), String> {
        let sid = &self.session_id;
        let inbox = self
            .rpc("approval::list-pending", json!({"session_id": sid}))
            .await?;
        let pending = inbox["pending"].as_array().cloned().unwrap_or_default();
        screen.say(
            "inbox",
            format!(
                "approval::list-pending {{\"session_id\":\"{sid}\"}} → {} held",
                pending.len()
            ),
        );
        for r in &pending {
            let what = match r["grant_request"]["dir"].as_str() {
                Some(dir) => format!(
                    "{} {dir} ({})",
                    r["kind"].as_str().unwrap_or("folder_access"),
                    r["grant_request"]["error_code"].as_str().unwrap_or("?")
                ),
                None => r["kind"].as_str().unwrap_or("function").to_string(),
            };
            screen.say(
                "",
                format!(
                    "· {}/{} {} {what}, in \"{}\", arguments {}",
                    r["session_id"].as_str().unwrap_or("?"),
                    r["function_call_id"].as_str().unwrap_or("?"),
                    r["function_id"].as_str().unwrap_or("?"),
                    r["session_title"].as_str().unwrap_or(""),
                    compact(&r["arguments_excerpt"]),
                ),
            );
        }
        Ok(())
    }

    async fn show_grants(&self, choice: &Choice, screen: &mut Screen<'_>) -> Result<(), String> {
        let sid = &self.session_id;
        match choice {
            Choice::Allow(Some("session" | "always")) => {
                let grants = self.harness.grants(sid);
                screen.say(
                    "harness",
                    format!("durable filesystem grants of {sid}: {}", grants.join(", ")),
                );
                if *choice == Choice::Allow(Some("always")) {
                    let shell = self.rpc("configuration::get", json!({"id": "shell"})).await;
                    match shell {
                        Ok(v) => screen.say("config", format!("shell fs.host_roots: {}", compact(&v["value"]["fs"]["host_roots"]))),
                        Err(_) => screen.say("config", "no shell configuration entry here: the worker logged it and released the call anyway"),
                    }
                }
            }
            Choice::Allow(_) => screen.say(
                "harness",
                format!("{FOLDER} was trusted for that run only (extra_roots)"),
            ),
            Choice::Deny(_) => screen.say(
                "gate",
                format!("{FOLDER} is remembered as denied for {sid}: no more prompts for it"),
            ),
        }
        Ok(())
    }
}

/// Prints what the harness did since the last look: hooks at pre-trigger,
/// target runs, hooks at post-trigger (the order a call goes through them).
struct Journal {
    hooks: usize,
    runs: usize,
}

impl Journal {
    fn now(harness: &HarnessDouble) -> Journal {
        Journal {
            hooks: harness.hook_calls().len(),
            runs: harness.runs().len(),
        }
    }

    fn print(
        &mut self,
        harness: &HarnessDouble,
        call_id: &str,
        gate_why: Option<&str>,
        screen: &mut Screen<'_>,
    ) {
        let hooks = harness.hook_calls();
        let runs = harness.runs();
        let new_hooks: Vec<_> = hooks[self.hooks.min(hooks.len())..]
            .iter()
            .filter(|h| h.call_id == call_id)
            .cloned()
            .collect();
        let hook_line = |h: &approval_gate_testkit::harness::HookCall, screen: &mut Screen<'_>| {
            let decision = match &h.reply {
                Ok(v) => v["decision"].as_str().unwrap_or("continue").to_string(),
                Err(e) => format!("error: {e}"),
            };
            let why = match (h.function_id.as_str(), decision.as_str()) {
                ("approval::gate", _) => gate_why.map(|w| format!("  ({w})")),
                ("approval::filesystem-access-watch", "hold") => {
                    Some("  (a folder prompt instead of the error)".to_string())
                }
                ("approval::filesystem-access-watch", _) => {
                    Some("  (the result goes to the agent as is)".to_string())
                }
                _ => None,
            };
            let reason = h
                .reply
                .as_ref()
                .ok()
                .and_then(|v| v["reason"].as_str())
                .map(|r| format!(": {r}"));
            screen.say(
                "hook",
                format!(
                    "{} {} → {decision}{}{}",
                    h.point.wire_name(),
                    h.function_id,
                    reason.unwrap_or_default(),
                    why.unwrap_or_default()
                ),
            );
        };
        for h in new_hooks
            .iter()
            .filter(|h| h.point.wire_name() == "pre_trigger")
        {
            hook_line(h, screen);
        }
        for r in runs[self.runs.min(runs.len())..]
            .iter()
            .filter(|r| r.call_id == call_id)
        {
            let text = text_of(&r.result);
            if r.result["is_error"] == true {
                let code = r.result["details"]["error"]["code"]
                    .as_str()
                    .unwrap_or("error");
                screen.say(
                    "target",
                    format!("{} failed: {code} {}", r.function_id, without_hint(&text)),
                );
            } else {
                // What it answered is on the agent's line.
                screen.say("target", format!("{} ran", r.function_id));
            }
        }
        for h in new_hooks
            .iter()
            .filter(|h| h.point.wire_name() == "post_trigger")
        {
            hook_line(h, screen);
        }
        self.hooks = hooks.len();
        self.runs = runs.len();
    }
}

/// Says where a call ended up, from the agent's side.
fn describe(state: &CallState, function_id: &str, screen: &mut Screen<'_>) {
    match state {
        CallState::Completed { result } if result["is_error"] == true => screen.say(
            "agent",
            format!(
                "got {function_id}'s error: {}",
                without_hint(&text_of(result))
            ),
        ),
        CallState::Completed { result } => screen.say(
            "agent",
            format!("got {function_id}'s result: {}", text_of(result)),
        ),
        CallState::Delivered { result, .. } => {
            let by = result["details"]["denied_by"].as_str().unwrap_or("?");
            screen.say(
                "agent",
                format!("got an error result (denied_by {by}): {}", text_of(result)),
            )
        }
        CallState::Denied { reason, .. } => screen.say("agent", format!("got a denial: {reason}")),
        CallState::Held { held_by, .. } => {
            screen.say("harness", format!("still held, by {held_by}"))
        }
        CallState::Abandoned { status } => screen.say(
            "harness",
            format!("the turn ended ({status}) while it was held"),
        ),
        CallState::Running => screen.say("harness", "still running"),
        CallState::AwaitingChild {
            child_session_id, ..
        } => screen.say(
            "harness",
            format!("waiting on the sub-agent {child_session_id}"),
        ),
    }
}
