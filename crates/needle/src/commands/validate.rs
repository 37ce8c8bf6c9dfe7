//! `needle validate` (being built; see the issue).

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> ExitCode {
    eprintln!("error: `needle validate` is not built yet");
    ExitCode::from(2)
}
