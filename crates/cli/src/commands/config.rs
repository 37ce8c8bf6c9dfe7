//! `needle config`: the configuration in force, as TOML: the defaults, overridden by the config
//! file and `NEEDLE_*` environment variables. Its output is a valid needle.toml with no secret in
//! it (people paste it into tickets): see `needle_runtime::secrets`.

use needle_runtime::secrets;
use needle_runtime::NeedleConfig;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// A needle.toml to read (default: ./needle.toml when it exists).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

pub fn run(args: Args) -> ExitCode {
    match load(args.config) {
        Ok(config) => {
            print!("{}", config.to_toml());
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {}", secrets::scrub(&message));
            ExitCode::from(2)
        }
    }
}

/// The configuration `needle serve` and `needle config` use: `--config FILE`, else
/// `./needle.toml` when present, then the environment. Warnings about it (a secret file every
/// user can read) go to stderr.
pub fn load(file: Option<PathBuf>) -> Result<NeedleConfig, String> {
    let file = file.or_else(|| {
        let local = PathBuf::from("needle.toml");
        local.is_file().then_some(local)
    });
    let config =
        NeedleConfig::load(file.as_deref(), std::env::vars()).map_err(|e| e.to_string())?;
    for warning in &config.secret_sources.warnings {
        eprintln!("needle: warning: {warning}");
    }
    Ok(config)
}
