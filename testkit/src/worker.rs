//! Starting the worker under test as the real binary, a child process (for
//! logs, SIGKILL and exit-code checks). The binary's path comes from the
//! caller (`env!("CARGO_BIN_EXE_approval-gate")` in the worker's tests and
//! benches): the test kit does not depend on the worker. In-process starts
//! call the worker's own `boot` and live with the tests.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The worker binary running as a child process; its stderr is collected.
pub struct WorkerProcess {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl WorkerProcess {
    /// Spawns `bin --url <url> <args>` with OTel off and waits for the ready
    /// line (panics with the collected output after `timeout`). Waits
    /// asynchronously: an in-process test engine runs on the same runtime.
    pub async fn spawn(bin: &Path, url: &str, args: &[&str], timeout: Duration) -> WorkerProcess {
        Self::spawn_with(bin, url, args, &[], timeout).await
    }

    /// As [`WorkerProcess::spawn`], with extra environment variables.
    pub async fn spawn_with(
        bin: &Path,
        url: &str,
        args: &[&str],
        envs: &[(&str, &str)],
        timeout: Duration,
    ) -> WorkerProcess {
        let process = Self::spawn_raw_with(bin, url, args, envs);
        if !process.wait_for_line("approval-gate ready", timeout).await {
            let out = process.output();
            panic!("worker not ready within {timeout:?}:\n{out}");
        }
        process
    }

    /// Spawns without waiting for readiness.
    pub fn spawn_raw(bin: &Path, url: &str, args: &[&str]) -> WorkerProcess {
        Self::spawn_raw_with(bin, url, args, &[])
    }

    /// As [`WorkerProcess::spawn_raw`], with extra environment variables.
    pub fn spawn_raw_with(
        bin: &Path,
        url: &str,
        args: &[&str],
        envs: &[(&str, &str)],
    ) -> WorkerProcess {
        let mut child = Command::new(bin)
            .arg("--url")
            .arg(url)
            .args(args)
            .env("OTEL_ENABLED", "false")
            .env(
                "RUST_LOG",
                std::env::var("AG_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .env("NO_COLOR", "1")
            .envs(envs.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let lines = Arc::new(Mutex::new(Vec::new()));
        for stream in [
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let sink = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if let Ok(mut l) = sink.lock() {
                        l.push(line);
                    }
                }
            });
        }
        WorkerProcess { child, lines }
    }

    /// The output so far.
    pub fn output(&self) -> String {
        self.lines.lock().map(|l| l.join("\n")).unwrap_or_default()
    }

    /// Waits until a line containing `needle` appears.
    pub async fn wait_for_line(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.output().contains(needle) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL: no cleanup at all.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then wait for the exit code (SIGKILL after `timeout`).
    pub async fn terminate(&mut self, timeout: Duration) -> Option<i32> {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status();
        self.wait(timeout).await
    }

    /// Waits for the exit code (SIGKILL after `timeout`).
    pub async fn wait(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.kill();
        None
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}
