//! `needle cluster up | status | down`: a whole distributed deployment on this machine in one
//! command, for trying the distributed mode and for tests. `up` starts a Kafka broker from the
//! project's jars (`scripts/kafka/broker.sh`), an S3-compatible server with `--history s3`
//! (`scripts/s3/minio.sh`), a generated stream on the data topic (`needle gen --to kafka://`),
//! N worker nodes and N api nodes on free loopback ports; writes the needle.toml they share,
//! prints it with the URLs, and stays in the foreground until Ctrl-C (or `needle cluster
//! down`), which stops everything it started. Its state directory (`state`) says what runs;
//! `up` starts the processes (`up`).
//!
//! Every process is tied to `up`: the broker and the S3 server by their scripts' watchdogs
//! (`--owner`), the needle processes by the kernel (a parent-death signal, Linux): a crash of
//! `up` leaves nothing running for long.

mod state;
mod up;

use state::{process_alive, ClusterState, DEFAULT_DIR};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(clap::Subcommand)]
enum ClusterCommand {
    /// Start a broker, worker nodes, api nodes and a generated stream on this machine, and
    /// stay in the foreground until Ctrl-C (which stops them all).
    Up(up::UpArgs),
    /// What runs: each process, whether it is alive, its URL and its /healthz.
    Status(StatusArgs),
    /// Stop everything `needle cluster up` started (SIGTERM, then SIGKILL after a grace).
    Down(DirArg),
}

#[derive(clap::Args)]
struct DirArg {
    /// The cluster's state directory.
    #[arg(long, default_value = DEFAULT_DIR)]
    dir: PathBuf,
}

#[derive(clap::Args)]
struct StatusArgs {
    #[command(flatten)]
    dir: DirArg,
    /// Print the status as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> ExitCode {
    let done = match args.command {
        ClusterCommand::Up(args) => up::run(args),
        ClusterCommand::Status(args) => status(&args),
        ClusterCommand::Down(args) => down(&args.dir),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

fn status(args: &StatusArgs) -> Result<(), String> {
    let state = ClusterState::load(&args.dir.dir)?;
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for p in &state.processes {
        let alive = state.running(p);
        let health = match (&p.url, p.kind.as_str()) {
            (Some(url), "api" | "worker") if alive => {
                match client.get(format!("{url}/healthz")).send() {
                    Ok(r) if r.status().is_success() => "ok".to_owned(),
                    Ok(r) => format!("answered {}", r.status()),
                    Err(_) => "no answer".to_owned(),
                }
            }
            _ => String::new(),
        };
        rows.push(serde_json::json!({
            "name": p.name, "kind": p.kind, "pid": p.pid, "alive": alive,
            "url": p.url, "healthz": health, "log": p.log,
        }));
    }
    let owner = process_alive(state.owner);
    if args.json {
        let status = serde_json::json!({
            "dir": state.dir, "owner": state.owner, "owner_alive": owner,
            "config": state.config, "processes": rows,
        });
        println!("{}", serde_json::to_string_pretty(&status).unwrap_or_default());
        return Ok(());
    }
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::NOTHING);
    table.set_header(["name", "pid", "alive", "url", "healthz", "log"]);
    for row in &rows {
        let text = |key: &str| match &row[key] {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => String::new(),
            other => other.to_string(),
        };
        table.add_row([
            text("name"),
            text("pid"),
            text("alive"),
            text("url"),
            text("healthz"),
            text("log"),
        ]);
    }
    println!(
        "cluster in {} (needle cluster up: pid {}, {})",
        state.dir.display(),
        state.owner,
        if owner { "running" } else { "gone" }
    );
    println!("{table}");
    Ok(())
}

fn down(dir: &std::path::Path) -> Result<(), String> {
    let state = ClusterState::load(dir)?;
    state.stop_all();
    // `up` in the foreground sees its processes gone and ends too
    let owner_is_up = state::command_line(state.owner).contains(" cluster up");
    if process_alive(state.owner) && owner_is_up && state.owner != std::process::id() {
        state::signal(state.owner, libc::SIGTERM);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while process_alive(state.owner) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let left: Vec<String> = state
        .processes
        .iter()
        .filter(|p| state.running(p))
        .map(|p| format!("{} (pid {})", p.name, p.pid))
        .collect();
    if !left.is_empty() {
        return Err(format!("still running: {}", left.join(", ")));
    }
    eprintln!("needle cluster: stopped; logs are in {}", state.dir.join("logs").display());
    Ok(())
}
