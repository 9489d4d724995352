//! A throwaway `redis-server` for real-engine runs on the engine's `redis`
//! state adapter (`iii-state: {adapter: {name: redis, config: {redis_url}}}`).
//!
//! It listens on a free loopback port, keeps its append-only file in a
//! temporary directory (`--appendonly yes --appendfsync everysec`, no RDB
//! snapshots), and is killed, by its own pid, when dropped. The binary is
//! `REDIS_SERVER_BIN` or `redis-server` on `PATH` (Debian package
//! `redis-server`); without one, [`RedisServer::start`] returns `None` and the
//! caller prints its one `SKIP` line.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a server may take to answer `PING` (an AOF replay included).
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The `redis-server` binary: `REDIS_SERVER_BIN`, else one on `PATH`.
pub fn redis_server_binary() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("REDIS_SERVER_BIN").filter(|b| !b.is_empty()) {
        return Some(PathBuf::from(bin)).filter(|bin| bin.is_file());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file())
}

/// A running `redis-server` on `127.0.0.1`.
pub struct RedisServer {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    child: Mutex<Option<Child>>,
}

impl std::fmt::Debug for RedisServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisServer")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl RedisServer {
    /// Starts a server on a free loopback port, or `None` when there is no
    /// `redis-server` binary.
    ///
    /// # Panics
    ///
    /// When the binary exists but the server does not answer within 30 s.
    pub async fn start() -> Option<RedisServer> {
        let bin = redis_server_binary()?;
        let dir = tempfile::Builder::new()
            .prefix("redis-")
            .tempdir()
            .unwrap_or_else(|err| panic!("no temporary directory for redis: {err}"));
        let port = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .unwrap_or_else(|err| panic!("no free loopback port: {err}"));
        let server = RedisServer {
            bin,
            dir,
            port,
            child: Mutex::new(None),
        };
        server.spawn();
        server.wait_ready().await;
        Some(server)
    }

    /// `redis://127.0.0.1:<port>`, the adapter's `redis_url`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// SIGKILL, then the same server again on the same port and directory
    /// (it replays its append-only file).
    pub async fn kill_and_restart(&self) {
        self.kill();
        self.spawn();
        self.wait_ready().await;
    }

    fn child(&self) -> MutexGuard<'_, Option<Child>> {
        self.child
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn spawn(&self) {
        let log = self.dir.path().join("redis.log");
        let child = Command::new(&self.bin)
            .arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "yes", "--appendfsync", "everysec"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {}: {err}", self.bin.display()));
        *self.child() = Some(child);
    }

    fn kill(&self) {
        if let Some(mut child) = self.child().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits until `PING` answers `+PONG` (not `-LOADING`).
    async fn wait_ready(&self) {
        let deadline = Instant::now() + READY_TIMEOUT;
        while !ping(self.port) {
            let exited = self
                .child()
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                panic!(
                    "redis-server exited during startup ({status}); see {}",
                    self.dir.path().join("redis.log").display()
                );
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer PING on port {} within {READY_TIMEOUT:?}",
                self.port
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// One `PING` in the Redis protocol; `true` on `+PONG`.
fn ping(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() {
        return false;
    }
    let mut reply = [0u8; 7];
    stream.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
