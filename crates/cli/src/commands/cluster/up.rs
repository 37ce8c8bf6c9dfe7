//! `needle cluster up`: starts the broker (and the S3 server), writes the needle.toml, starts
//! the generator, the worker nodes and the api nodes, each logging to `DIR/logs/NAME.log`,
//! records each in the state directory as it starts, prints the URLs, and waits for Ctrl-C or
//! SIGTERM; then stops everything. A failure on the way stops what was started.

use super::state::{ClusterState, Started, DEFAULT_DIR};
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct UpArgs {
    /// Worker nodes (each reads its share of the data topic's partitions).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Api nodes (each serves the HTTP API and the web UI).
    #[arg(long, default_value_t = 1)]
    api: usize,
    /// Where the workers keep history: local (a directory each under DIR) or s3 (one store
    /// the workers share, on an S3-compatible server started for the cluster).
    #[arg(long, value_parser = ["local", "s3"], default_value = "local")]
    history: String,
    /// The state directory: logs, data, the needle.toml, what runs.
    #[arg(long, default_value = DEFAULT_DIR)]
    dir: PathBuf,
    /// The generated stream's records per second (bullet records, about 1.8 KiB each).
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// The data topic's partitions.
    #[arg(long, default_value_t = 4)]
    partitions: i32,
}

/// The data topic the generator fills.
const DATA_TOPIC: &str = "needle-data";
/// How long a node may take to say it listens.
const START_WAIT: Duration = Duration::from_secs(60);

pub fn run(args: UpArgs) -> Result<(), String> {
    if args.workers == 0 || args.api == 0 {
        return Err("a cluster needs at least one worker node and one api node".into());
    }
    let scripts = find_scripts()?;
    std::fs::create_dir_all(args.dir.join("logs"))
        .map_err(|e| format!("cannot create {}: {e}", args.dir.display()))?;
    let dir = args.dir.canonicalize().map_err(|e| format!("{}: {e}", args.dir.display()))?;
    if let Ok(old) = ClusterState::load(&dir) {
        if old.processes.iter().any(|p| old.running(p)) {
            return Err(format!(
                "a cluster is running from {} already: needle cluster down --dir {}",
                dir.display(),
                args.dir.display()
            ));
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::SeqCst))
            .map_err(|e| format!("cannot handle Ctrl-C: {e}"))?;
    }
    let mut state = ClusterState {
        owner: std::process::id(),
        dir: dir.clone(),
        data_topic: DATA_TOPIC.into(),
        config: dir.join("needle.toml"),
        ..ClusterState::default()
    };
    let mut children = Vec::new();
    let started = start_all(&args, &scripts, &mut state, &mut children, &stop);
    if let Err(e) = started {
        eprintln!("needle cluster: {e}; stopping what was started");
        state.stop_all();
        return Err(e);
    }
    print_summary(&state, &args);
    watch(&state, &mut children, &stop);
    eprintln!("needle cluster: stopping");
    state.stop_all();
    for (_, child) in &mut children {
        let _ = child.wait();
    }
    eprintln!("needle cluster: stopped; logs are in {}", dir.join("logs").display());
    Ok(())
}

fn start_all(
    args: &UpArgs,
    scripts: &Path,
    state: &mut ClusterState,
    children: &mut Vec<(String, Child)>,
    stop: &AtomicBool,
) -> Result<(), String> {
    let dir = state.dir.clone();
    let logs = dir.join("logs");
    state.save()?;
    eprintln!("needle cluster: starting a Kafka broker (scripts/kafka/broker.sh)");
    let kafka_dir = dir.join("kafka");
    state.bootstrap = run_script(&scripts.join("kafka/broker.sh"), &kafka_dir)?;
    record_script_process(state, "kafka", &kafka_dir, "broker.log", &state.bootstrap.clone())?;
    let mut object_store = None;
    if args.history == "s3" {
        eprintln!("needle cluster: starting an S3-compatible server (scripts/s3/minio.sh)");
        let s3_dir = dir.join("s3");
        let endpoint = run_script(&scripts.join("s3/minio.sh"), &s3_dir)?;
        record_script_process(state, "s3", &s3_dir, "minio.log", &endpoint)?;
        let read = |name: &str| {
            std::fs::read_to_string(s3_dir.join(name))
                .map(|s| s.trim().to_owned())
                .map_err(|e| format!("{}: {e}", s3_dir.join(name).display()))
        };
        object_store = Some(ObjectStore {
            endpoint: endpoint.clone(),
            bucket: read("bucket")?,
            access_key: read("access_key")?,
            secret_key: read("secret_key")?,
        });
        state.s3_endpoint = Some(endpoint);
    }
    let toml = needle_toml(&state.bootstrap, object_store.as_ref());
    std::fs::write(&state.config, &toml)
        .map_err(|e| format!("cannot write {}: {e}", state.config.display()))?;
    let config = state.config.to_string_lossy().into_owned();
    let needle = std::env::current_exe().map_err(|e| format!("where is this needle? {e}"))?;

    eprintln!("needle cluster: starting the generator ({} records/s to {DATA_TOPIC})", args.rate);
    let target = format!("kafka://{}/{DATA_TOPIC}", state.bootstrap);
    let mut gen = Command::new(&needle);
    gen.args(["gen", "bullet", "--to", &target, "--config", &config]).args([
        "--partitions",
        &args.partitions.to_string(),
        "--rate",
        &args.rate.to_string(),
    ]);
    let child = spawn_tied(&mut gen, &logs.join("gen.log"))?;
    record_child(state, children, "gen", "gen", child, None, logs.join("gen.log"))?;
    wait_for_topic(&state.bootstrap, DATA_TOPIC)?;

    let nodes = (1..=args.workers)
        .map(|n| ("worker", format!("worker-{n}")))
        .chain((1..=args.api).map(|n| ("api", format!("api-{n}"))));
    for (role, name) in nodes {
        if stop.load(Ordering::SeqCst) {
            return Err("interrupted".into());
        }
        let log = logs.join(format!("{name}.log"));
        let mut serve = Command::new(&needle);
        serve
            .args(["serve", "--role", role, "--config", &config, "--listen", "127.0.0.1:0"])
            .env("NEEDLE_KAFKA__NODE_ID", &name);
        if role == "worker" {
            match &object_store {
                Some(_) => {
                    // the store (history.dir) is the workers' to share; the cache is each one's
                    let cache = dir.join("history-cache").join(&name);
                    serve.env("NEEDLE_HISTORY__CACHE_DIR", cache);
                }
                None => {
                    let local = dir.join("history").join(&name);
                    serve.args(["--history", &local.to_string_lossy()]);
                }
            }
        }
        eprintln!("needle cluster: starting {name}");
        let mut child = spawn_tied(&mut serve, &log)?;
        let url = match wait_for_url(&mut child, &log) {
            Ok(url) => url,
            Err(e) => {
                record_child(state, children, role, &name, child, None, log)?;
                return Err(format!("{name} did not start: {e}"));
            }
        };
        record_child(state, children, role, &name, child, Some(url), log)?;
    }
    Ok(())
}

/// Until Ctrl-C or SIGTERM: says when a process ends (and reaps it).
fn watch(state: &ClusterState, children: &mut [(String, Child)], stop: &AtomicBool) {
    let mut ended = vec![false; children.len()];
    let mut broker_gone = false;
    while !stop.load(Ordering::SeqCst) {
        for ((name, child), ended) in children.iter_mut().zip(ended.iter_mut()) {
            if !*ended {
                if let Ok(Some(status)) = child.try_wait() {
                    *ended = true;
                    eprintln!("needle cluster: {name} (pid {}) ended: {status}", child.id());
                }
            }
        }
        let broker = state.processes.iter().find(|p| p.kind == "kafka");
        if !broker_gone && broker.is_some_and(|b| !state.running(b)) {
            broker_gone = true;
            eprintln!("needle cluster: the Kafka broker is gone");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn print_summary(state: &ClusterState, args: &UpArgs) {
    let toml = std::fs::read_to_string(&state.config).unwrap_or_default();
    let mut out = String::new();
    out.push_str(&format!(
        "\nneedle cluster: {} api node(s), {} worker node(s), Kafka at {}, history {}\n",
        args.api, args.workers, state.bootstrap, args.history
    ));
    for p in &state.processes {
        let url = p.url.as_deref().unwrap_or("");
        let what = match p.kind.as_str() {
            "api" => format!("{url}  (the web UI; its Cluster page: {url}/#/cluster)"),
            "worker" => format!("{url}  (/metrics, /healthz, /api/v1/queries)"),
            "gen" => format!(
                "{} records/s of generated bullet records to {}",
                args.rate, state.data_topic
            ),
            _ => url.to_owned(),
        };
        out.push_str(&format!("  {:<10} pid {:<8} {what}\n", p.name, p.pid));
    }
    out.push_str(&format!("  logs       {}\n", state.dir.join("logs").display()));
    out.push_str(&format!("\n# {}\n{toml}\n", state.config.display()));
    out.push_str(&format!(
        "Ctrl-C here (or needle cluster down --dir {}) stops it all.\nneedle cluster: ready\n",
        state.dir.display()
    ));
    print!("{out}");
    use std::io::Write;
    let _ = std::io::stdout().flush();
}

/// How the workers reach the S3-compatible server.
struct ObjectStore {
    endpoint: String,
    bucket: String,
    access_key: String,
    secret_key: String,
}

/// The needle.toml every node reads (a worker's name and history prefix come from its
/// command line and environment).
fn needle_toml(bootstrap: &str, object_store: Option<&ObjectStore>) -> String {
    let mut toml = format!(
        r#"# written by needle cluster up: the nodes of this cluster read it
# (each worker also gets NEEDLE_KAFKA__NODE_ID and either --history DIR or, with history on
# object storage, NEEDLE_HISTORY__CACHE_DIR; each api node NEEDLE_KAFKA__NODE_ID)

[kafka]
brokers = "{bootstrap}"
data_topic = "{DATA_TOPIC}"
query_topic = "needle-queries"
results_topic = "needle-results"
group = "needle-workers"

[kafka.properties]
# a killed worker's partitions move after 10 s (librdkafka's default is 45 s)
"session.timeout.ms" = 10000
"heartbeat.interval.ms" = 1000
"#
    );
    if let Some(store) = object_store {
        toml.push_str(&format!(
            r#"
[history]
# one store the workers share, each writing under its node name (each its own cache_dir)
dir = "s3://{bucket}/cluster"

[history.object_store]
endpoint = "{endpoint}"
region = "us-east-1"
access_key_id = "{access}"
secret_access_key = "{secret}"
allow_http = true
"#,
            bucket = store.bucket,
            endpoint = store.endpoint,
            access = store.access_key,
            secret = store.secret_key,
        ));
    }
    toml
}

/// `scripts/` of needle's source tree: from the current directory or the binary's, or one
/// of their parents (`target/debug/needle` is two levels down).
fn find_scripts() -> Result<PathBuf, String> {
    let mut starts = Vec::new();
    starts.extend(std::env::current_dir().ok());
    starts.extend(std::env::current_exe().ok().and_then(|exe| exe.parent().map(Path::to_path_buf)));
    for start in &starts {
        for dir in start.ancestors() {
            if dir.join("scripts/kafka/broker.sh").is_file() {
                return Ok(dir.join("scripts"));
            }
        }
    }
    Err("needle cluster up runs the broker from needle's source tree (scripts/kafka/broker.sh): \
         run it inside a checkout of needle"
        .into())
}

/// Runs `script start DIR --owner <this process>` and returns what it prints (an address).
fn run_script(script: &Path, dir: &Path) -> Result<String, String> {
    let owner = std::process::id().to_string();
    let mut command = Command::new("bash");
    command.arg(script).arg("start").arg(dir).args(["--owner", &owner]);
    // (a process group of its own: Ctrl-C in the terminal reaches `up`, which stops things in
    // order, not the broker at once)
    command.process_group(0).stdin(Stdio::null()).stderr(Stdio::inherit());
    let out = command.output().map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let printed =
        String::from_utf8_lossy(&out.stdout).trim().lines().last().unwrap_or("").to_owned();
    if !out.status.success() || printed.is_empty() {
        return Err(format!(
            "{} start {} failed ({})",
            script.display(),
            dir.display(),
            out.status
        ));
    }
    Ok(printed)
}

/// Records the process a script started (its pid file in `dir`).
fn record_script_process(
    state: &mut ClusterState,
    kind: &str,
    dir: &Path,
    log: &str,
    url: &str,
) -> Result<(), String> {
    let read_pid = |file: &str| {
        std::fs::read_to_string(dir.join(file)).ok().and_then(|p| p.trim().parse().ok())
    };
    let pid = read_pid("pid").ok_or_else(|| format!("no process id in {}", dir.display()))?;
    state.processes.push(Started {
        kind: kind.into(),
        name: kind.into(),
        pid,
        url: Some(url.to_owned()),
        log: dir.join(log),
        watchdog: read_pid("watchdog.pid"),
    });
    state.save()
}

fn record_child(
    state: &mut ClusterState,
    children: &mut Vec<(String, Child)>,
    kind: &str,
    name: &str,
    child: Child,
    url: Option<String>,
    log: PathBuf,
) -> Result<(), String> {
    state.processes.push(Started {
        kind: kind.into(),
        name: name.into(),
        pid: child.id(),
        url,
        log,
        watchdog: None,
    });
    children.push((name.to_owned(), child));
    state.save()
}

/// Starts `command` with its output in `log`, in a process group of its own, and (on Linux)
/// sent SIGTERM by the kernel when this process dies.
fn spawn_tied(command: &mut Command, log: &Path) -> Result<Child, String> {
    let out = File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    command.stdin(Stdio::null()).stdout(out).stderr(err).process_group(0);
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id();
        // SAFETY: between fork and exec only async-signal-safe calls: prctl, getppid, _exit.
        unsafe {
            command.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                // the parent died before the line above: nobody would send the signal
                if libc::getppid() as u32 != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
    command.spawn().map_err(|e| format!("cannot start {:?}: {e}", command.get_program()))
}

/// The URL a `needle serve` says it listens at (in its log), once it does.
fn wait_for_url(child: &mut Child, log: &Path) -> Result<String, String> {
    let deadline = Instant::now() + START_WAIT;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(rest) = text.split("needle listening on ").nth(1) {
            return Ok(rest.split_whitespace().next().unwrap_or("").to_owned());
        }
        let tail = || {
            text.lines()
                .rev()
                .take(10)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        };
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("it exited ({status}); the end of {}:\n{}", log.display(), tail()));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "no 'needle listening on' in {} after {START_WAIT:?}",
                log.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until `topic` exists on the broker (the generator creates it).
fn wait_for_topic(bootstrap: &str, topic: &str) -> Result<(), String> {
    let connection = needle_kafka::client::Connection::new(bootstrap, &Default::default())
        .map_err(|e| e.to_string())?;
    let found = connection.wait_for_topic(topic, START_WAIT);
    found.map(|_| ()).map_err(|e| format!("the data topic: {e}"))
}
