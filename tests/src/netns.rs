//! Linux network namespaces for partition tests: a namespace reached from the root
//! namespace through one veth pair, a partition that cuts the pair without anyone seeing
//! a reset, and cleanup that runs on drop (also while a failed test unwinds) and, for
//! runs that were killed outright, at the start of the next run.
//!
//! Everything is done with the `ip` command of iproute2, as root. Names carry the test
//! process's pid and a counter, so parallel runs never collide; a state file per
//! namespace in [`state_dir`] lets a later run remove what a dead one left behind.

use std::fs;
use std::io;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Route metric of the fallback blackhole route: while the veth is up its connected
/// route (metric 0) wins; while it is down, packets for the namespace are discarded
/// here instead of following the default route out of the machine.
const BLACKHOLE_METRIC: &str = "4242";
/// Subnets are /30s carved out of 10.201.0.0/16.
const SUBNETS: u32 = 16384;
/// Every namespace's subnet lies in this range; [`Netns::route_to_peers`] routes it.
const RANGE: &str = "10.201.0.0/16";
/// Priority of the rules [`Netns::block_to`] and its siblings add inside a namespace:
/// after the `local` table (0), so the namespace's own addresses and loopback stay
/// reachable and incoming packets are still delivered, before `main` (32766), so they
/// win over every route.
const BLOCK_PREF: &str = "100";

static COUNTER: AtomicU32 = AtomicU32::new(0);

#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("network namespaces need root (euid {0})")]
    NotRoot(u32),
    #[error("`ip {args}` could not run: {source} (install iproute2)")]
    Spawn { args: String, source: io::Error },
    #[error("`ip {args}` failed: {stderr}")]
    Failed { args: String, stderr: String },
    #[error("no free /30 subnet in 10.201.0.0/16")]
    NoSubnet,
    #[error("state file: {0}")]
    State(#[from] io::Error),
}

/// Runs `ip <args>`; its stdout on success.
pub fn ip(args: &[&str]) -> Result<String, NetnsError> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| NetnsError::Spawn {
            args: args.join(" "),
            source,
        })?;
    if !out.status.success() {
        return Err(NetnsError::Failed {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Where each live namespace records what to remove (`ns`, root veth, subnet).
pub fn state_dir() -> PathBuf {
    std::env::temp_dir().join("rmq-e2e-netns")
}

/// An exclusive lock on the state directory, released when the file closes.
fn lock_state_dir() -> io::Result<fs::File> {
    use std::os::fd::AsRawFd;
    fs::create_dir_all(state_dir())?;
    let file = fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(state_dir().join(".lock"))?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

fn pid_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists; nothing is delivered.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// What one namespace consists of; also the content of its state file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Names {
    ns: String,
    root_if: String,
    ns_if: String,
    /// Index of the /30 in 10.201.0.0/16.
    subnet: u32,
}

impl Names {
    fn new(pid: u32, n: u32, subnet: u32) -> Self {
        // Interface names are at most 15 bytes: "rp" + 7-digit pid + "r"/"n" + counter.
        Self {
            ns: format!("rmqp-{pid}-{n}"),
            root_if: format!("rp{pid}r{n}"),
            ns_if: format!("rp{pid}n{n}"),
            subnet,
        }
    }

    fn base(&self) -> [u8; 4] {
        let i = self.subnet;
        [10, 201, (i / 64) as u8, ((i % 64) * 4) as u8]
    }

    fn cidr(&self) -> String {
        let [a, b, c, d] = self.base();
        format!("{a}.{b}.{c}.{d}/30")
    }

    fn host(&self, last: u8) -> String {
        let [a, b, c, d] = self.base();
        format!("{a}.{b}.{c}.{}", d + last)
    }

    fn to_state(&self) -> String {
        format!(
            "{}\n{}\n{}\n{}\n",
            self.ns, self.root_if, self.ns_if, self.subnet
        )
    }

    fn from_state(text: &str) -> Option<Self> {
        let mut lines = text.lines();
        Some(Self {
            ns: lines.next()?.to_owned(),
            root_if: lines.next()?.to_owned(),
            ns_if: lines.next()?.to_owned(),
            subnet: lines.next()?.parse().ok().filter(|s| *s < SUBNETS)?,
        })
    }

    /// Removes everything; each step may already be gone.
    fn remove(&self) {
        let _ = ip(&["link", "del", &self.root_if]);
        let _ = ip(&["netns", "del", &self.ns]);
        let cidr = self.cidr();
        let _ = ip(&[
            "route",
            "del",
            "blackhole",
            &cidr,
            "metric",
            BLACKHOLE_METRIC,
        ]);
    }
}

/// Removes namespaces, veths and routes left by test processes that no longer run.
pub fn clean_leftovers() {
    if let Ok(entries) = fs::read_dir(state_dir()) {
        for entry in entries.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = file.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
                continue;
            };
            if pid_alive(pid) {
                continue;
            }
            if let Some(names) = fs::read_to_string(entry.path())
                .ok()
                .and_then(|t| Names::from_state(&t))
            {
                names.remove();
            }
            let _ = fs::remove_file(entry.path());
        }
    }
    // Namespaces whose state file was never written (killed in between).
    if let Ok(list) = ip(&["netns", "list"]) {
        for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
            let Some(pid) = name
                .strip_prefix("rmqp-")
                .and_then(|rest| rest.split('-').next())
                .and_then(|p| p.parse::<i32>().ok())
            else {
                continue;
            };
            if !pid_alive(pid) {
                let _ = ip(&["netns", "del", name]);
            }
        }
    }
}

/// A network namespace joined to the root namespace by a veth pair; the root end has
/// [`Netns::root_ip`], the namespace end [`Netns::ns_ip`]. Removed on drop.
#[derive(Debug)]
pub struct Netns {
    names: Names,
    state_file: PathBuf,
    pub root_ip: String,
    pub ns_ip: String,
}

impl Netns {
    /// Creates the namespace and its link; fails with [`NetnsError::NotRoot`] or the `ip`
    /// error when this machine does not allow it.
    pub fn create() -> Result<Self, NetnsError> {
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        if euid != 0 {
            return Err(NetnsError::NotRoot(euid));
        }
        clean_leftovers();
        Self::create_as(std::process::id())
    }

    /// Creates the namespace under the name of process `pid`.
    fn create_as(pid: u32) -> Result<Self, NetnsError> {
        // Parallel test processes pick subnets one at a time.
        let _lock = lock_state_dir()?;
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let used = ip(&["-4", "route", "show"])?;
        let start = (pid.wrapping_mul(131).wrapping_add(n * 7)) % SUBNETS;
        let subnet = (0..SUBNETS)
            .map(|k| (start + k) % SUBNETS)
            .find(|s| {
                let probe = Names::new(pid, n, *s).cidr();
                !used.lines().any(|l| l.contains(&probe))
            })
            .ok_or(NetnsError::NoSubnet)?;
        let names = Names::new(pid, n, subnet);
        let state_file = state_dir().join(format!("{pid}-{n}"));
        fs::write(&state_file, names.to_state())?;
        let netns = Self {
            root_ip: names.host(1),
            ns_ip: names.host(2),
            names,
            state_file,
        };
        // From here on, drop removes whatever part was made.
        netns.setup()?;
        Ok(netns)
    }

    fn setup(&self) -> Result<(), NetnsError> {
        let n = &self.names;
        let (root_cidr, ns_cidr) = (format!("{}/30", self.root_ip), format!("{}/30", self.ns_ip));
        ip(&["netns", "add", &n.ns])?;
        ip(&[
            "link", "add", &n.root_if, "type", "veth", "peer", "name", &n.ns_if,
        ])?;
        ip(&["link", "set", &n.ns_if, "netns", &n.ns])?;
        ip(&["addr", "add", &root_cidr, "dev", &n.root_if])?;
        ip(&["link", "set", &n.root_if, "up"])?;
        ip(&["-n", &n.ns, "addr", "add", &ns_cidr, "dev", &n.ns_if])?;
        ip(&["-n", &n.ns, "link", "set", &n.ns_if, "up"])?;
        ip(&["-n", &n.ns, "link", "set", "lo", "up"])?;
        let cidr = n.cidr();
        ip(&[
            "route",
            "add",
            "blackhole",
            &cidr,
            "metric",
            BLACKHOLE_METRIC,
        ])?;
        self.wait_reachable(Duration::from_secs(5))
    }

    /// Waits until the root end can route to the namespace end (the veth came up).
    fn wait_reachable(&self, within: Duration) -> Result<(), NetnsError> {
        let deadline = Instant::now() + within;
        loop {
            let route = ip(&["route", "get", &self.ns_ip]).unwrap_or_default();
            if route.contains(&self.names.root_if) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(NetnsError::Failed {
                    args: format!("route get {}", self.ns_ip),
                    stderr: format!("no route through {}: {route}", self.names.root_if),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn name(&self) -> &str {
        &self.names.ns
    }

    /// The root namespace's end of the veth pair.
    pub fn root_if(&self) -> &str {
        &self.names.root_if
    }

    /// `ip netns exec <ns>`: prefix a command with this to run it inside.
    pub fn exec_prefix(&self) -> Vec<String> {
        ["ip", "netns", "exec", self.name()]
            .map(str::to_owned)
            .to_vec()
    }

    /// A command that runs `program` inside the namespace.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", self.name()]).arg(program);
        cmd
    }

    /// Cuts the link: the root end goes down, so the namespace end loses its carrier.
    /// Packets either way are dropped silently (no RST, no ICMP reaches a peer); new
    /// connections from the root namespace fail locally on the blackhole route.
    pub fn partition(&self) -> Result<(), NetnsError> {
        ip(&["link", "set", &self.names.root_if, "down"]).map(|_| ())
    }

    /// Brings the link back; established connections resume where TCP left them.
    pub fn heal(&self) -> Result<(), NetnsError> {
        ip(&["link", "set", &self.names.root_if, "up"])?;
        self.wait_reachable(Duration::from_secs(5))
    }

    /// Lets the namespace reach every other namespace, and the root namespace at any
    /// address in 10.201.0.0/16, through the root namespace: a route inside, and IPv4
    /// forwarding switched on for packets arriving on this pair's root end only. The
    /// global `ip_forward` stays as it is (forwarding is decided per ingress interface),
    /// and both settings vanish with the namespace and the veth.
    pub fn route_to_peers(&self) -> Result<(), NetnsError> {
        ip(&[
            "-n",
            &self.names.ns,
            "route",
            "add",
            RANGE,
            "via",
            &self.root_ip,
        ])?;
        let knob = format!("/proc/sys/net/ipv4/conf/{}/forwarding", self.names.root_if);
        fs::write(knob, "1")?;
        Ok(())
    }

    /// Drops everything the namespace sends to `ip` (its own processes get a local
    /// error, the peer sees silence); packets from `ip` still arrive.
    pub fn block_to(&self, ip: &str) -> Result<(), NetnsError> {
        self.block(&["to", ip])
    }

    /// Drops what the namespace sends to TCP port `port` at `ip` only: other traffic to
    /// that address, such as answers to a client connecting from it, still flows.
    pub fn block_to_port(&self, ip: &str, port: u16) -> Result<(), NetnsError> {
        self.block(&["to", ip, "ipproto", "tcp", "dport", &port.to_string()])
    }

    /// A one-way partition: everything the namespace sends out is dropped, while
    /// everything sent to it still arrives (requests reach its processes, their answers
    /// never leave).
    pub fn block_outgoing(&self) -> Result<(), NetnsError> {
        self.block(&[])
    }

    fn block(&self, selector: &[&str]) -> Result<(), NetnsError> {
        let mut args = vec![
            "-n",
            self.names.ns.as_str(),
            "rule",
            "add",
            "pref",
            BLOCK_PREF,
        ];
        args.extend_from_slice(selector);
        args.push("blackhole");
        // The same block twice is one block: the kernel refuses a duplicate rule.
        match ip(&args) {
            Err(NetnsError::Failed { stderr, .. }) if stderr.contains("File exists") => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// Removes every block this namespace has; established connections resume.
    pub fn unblock_all(&self) -> Result<(), NetnsError> {
        // `ip rule del pref N` removes one rule of that priority per call; it fails
        // once none is left. A bound keeps a misbehaving `ip` from spinning forever.
        for _ in 0..1000 {
            if ip(&["-n", &self.names.ns, "rule", "del", "pref", BLOCK_PREF]).is_err() {
                return if self.blocks()?.is_empty() {
                    Ok(())
                } else {
                    Err(NetnsError::Failed {
                        args: format!("-n {} rule del pref {BLOCK_PREF}", self.names.ns),
                        stderr: "blocks remain".to_owned(),
                    })
                };
            }
        }
        Err(NetnsError::Failed {
            args: format!("-n {} rule del pref {BLOCK_PREF}", self.names.ns),
            stderr: "too many blocks".to_owned(),
        })
    }

    /// The blocking rules in place, as `ip rule` lists them.
    pub fn blocks(&self) -> Result<Vec<String>, NetnsError> {
        let list = ip(&["-n", &self.names.ns, "rule", "show", "pref", BLOCK_PREF])?;
        Ok(list
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.names.remove();
        let _ = fs::remove_file(&self.state_file);
    }
}

/// A process started inside a namespace; SIGKILLed on drop (`ip netns exec` execs the
/// program in place, so the child's pid is the program's).
pub struct NsChild {
    child: Child,
}

impl NsChild {
    pub fn spawn(mut cmd: Command) -> io::Result<Self> {
        Ok(Self {
            child: cmd.spawn()?,
        })
    }

    /// The exit status, if it has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for NsChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_interface_limits_and_state_round_trips() {
        let n = Names::new(4_194_304, 99, SUBNETS - 1);
        assert!(n.root_if.len() <= 15 && n.ns_if.len() <= 15, "{n:?}");
        assert_eq!(n.cidr(), "10.201.255.252/30");
        assert_eq!(
            (n.host(1), n.host(2)),
            ("10.201.255.253".to_owned(), "10.201.255.254".to_owned())
        );
        assert_eq!(Names::from_state(&n.to_state()), Some(n));
        assert_eq!(Names::from_state("a\nb\nc\n99999\n"), None);
        assert_eq!(Names::new(1, 0, 0).cidr(), "10.201.0.0/30");
    }

    /// Runs `f` on a thread that has joined namespace `ns` (sockets it makes live there).
    fn inside<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        use std::os::fd::AsRawFd;
        let file = fs::File::open(format!("/var/run/netns/{ns}")).unwrap();
        std::thread::spawn(move || {
            // SAFETY: setns on this thread only, with a descriptor it keeps open.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0);
            f()
        })
        .join()
        .unwrap()
    }

    fn reaches(from: Option<&str>, to: std::net::SocketAddr) -> bool {
        let attempt =
            move || std::net::TcpStream::connect_timeout(&to, Duration::from_millis(300)).is_ok();
        match from {
            Some(ns) => inside(ns, attempt),
            None => attempt(),
        }
    }

    /// Namespaces reach each other through the root namespace; each kind of block cuts
    /// exactly what it names, and unblocking restores everything.
    #[test]
    fn peers_route_through_the_root_namespace_and_blocks_cut_what_they_name() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 || ip(&["netns", "list"]).is_err() {
            assert_ne!(
                std::env::var("RMQ_REQUIRE_NETNS").as_deref(),
                Ok("1"),
                "RMQ_REQUIRE_NETNS=1 but network namespaces are unavailable"
            );
            eprintln!("SKIPPED peers_route_through_the_root_namespace: needs root and iproute2");
            return;
        }
        let (a, b) = (Netns::create().unwrap(), Netns::create().unwrap());
        a.route_to_peers().unwrap();
        b.route_to_peers().unwrap();
        let listen = |ns: &Netns| {
            let host = ns.ns_ip.clone();
            let l = inside(ns.name(), move || {
                std::net::TcpListener::bind((host.as_str(), 0)).unwrap()
            });
            let addr = l.local_addr().unwrap();
            // Accepts stay queued in the backlog; a completed handshake is all we check.
            (l, addr)
        };
        let (_lb, at_b) = listen(&b);
        let (_la, at_a) = listen(&a);
        let root = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
        let root_port = root.local_addr().unwrap().port();
        let root_at = |ns: &Netns| -> std::net::SocketAddr {
            format!("{}:{root_port}", ns.root_ip).parse().unwrap()
        };
        let (from_a, from_b) = (Some(a.name()), Some(b.name()));
        assert!(reaches(from_a, at_b) && reaches(from_b, at_a) && reaches(None, at_a));
        assert!(reaches(from_a, root_at(&a)) && reaches(from_a, root_at(&b)));

        a.block_to(&b.ns_ip).unwrap();
        assert!(!reaches(from_a, at_b), "a reaches b through a block");
        assert!(reaches(from_a, root_at(&a)) && reaches(None, at_a));
        a.unblock_all().unwrap();

        a.block_to_port(&a.root_ip, root_port).unwrap();
        assert!(!reaches(from_a, root_at(&a)), "a reaches the blocked port");
        assert!(reaches(from_a, root_at(&b)) && reaches(None, at_a) && reaches(from_a, at_b));
        a.unblock_all().unwrap();

        // One way: packets to a arrive, its answers (the SYN-ACK) never leave.
        a.block_outgoing().unwrap();
        a.block_outgoing().unwrap();
        assert_eq!(a.blocks().unwrap().len(), 1, "a repeated block is one rule");
        assert!(!reaches(None, at_a) && !reaches(from_b, at_a) && !reaches(from_a, at_b));
        a.unblock_all().unwrap();
        assert!(a.blocks().unwrap().is_empty());
        assert!(reaches(None, at_a) && reaches(from_b, at_a) && reaches(from_a, at_b));

        // A cut link heals with the routes between namespaces intact.
        a.partition().unwrap();
        assert!(!reaches(from_b, at_a));
        a.heal().unwrap();
        assert!(reaches(from_b, at_a) && reaches(from_a, at_b));
    }

    /// What a test process killed with SIGKILL leaves behind is removed by the next run.
    #[test]
    fn leftovers_of_a_dead_run_are_removed() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 || ip(&["netns", "list"]).is_err() {
            assert_ne!(
                std::env::var("RMQ_REQUIRE_NETNS").as_deref(),
                Ok("1"),
                "RMQ_REQUIRE_NETNS=1 but network namespaces are unavailable"
            );
            eprintln!("SKIPPED leftovers_of_a_dead_run_are_removed: needs root and iproute2");
            return;
        }
        let mut gone = Command::new("true").spawn().unwrap();
        let dead = gone.id();
        gone.wait().unwrap();
        let leftover = Netns::create_as(dead).unwrap();
        let (ns, root_if) = (leftover.name().to_owned(), leftover.root_if().to_owned());
        let state_file = leftover.state_file.clone();
        std::mem::forget(leftover);
        assert!(ip(&["netns", "list"]).unwrap().contains(&ns));
        assert!(state_file.exists());
        clean_leftovers();
        assert!(!ip(&["netns", "list"]).unwrap().contains(&ns));
        assert!(ip(&["link", "show", &root_if]).is_err());
        assert!(!state_file.exists());
    }
}
