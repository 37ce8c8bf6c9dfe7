//! `docs/deploy.md`'s systemd units and Kubernetes manifests against the real binary: each
//! `needle.toml` in them loads (`needle config --config`), each `NEEDLE_*` variable they set
//! names a setting and loads with the value given, each node name is one needle allows, and
//! each flag they pass is one `needle serve` takes.

use std::process::Command;

const NEEDLE: &str = env!("CARGO_BIN_EXE_needle");

/// The fenced code blocks of a Markdown text: (language, text).
fn blocks(markdown: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in markdown.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(language)) => open = Some((language.trim().to_owned(), String::new())),
            (Some(_), Some(_)) => found.extend(open.take()),
            (Some((_, text)), None) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, None) => {}
        }
    }
    found
}

/// What the deployments give needle.
#[derive(Debug, Default)]
struct Deployment {
    /// `needle.toml` texts.
    configs: Vec<String>,
    /// Environment variables, with their values as a node would see them.
    env: Vec<(String, String)>,
    /// `needle` command lines (past the program's name).
    commands: Vec<Vec<String>>,
}

/// A systemd unit: its `ExecStart=` and `Environment=` lines, the unit's specifiers (`%H`, the
/// host name) filled in.
fn read_systemd(unit: &str, into: &mut Deployment) {
    let fill = |text: &str| text.replace("%H", "node-1.example.com");
    for line in unit.lines() {
        if let Some(command) = line.strip_prefix("ExecStart=") {
            let words: Vec<String> = command.split_whitespace().skip(1).map(fill).collect();
            into.commands.push(words);
        } else if let Some(setting) = line.strip_prefix("Environment=") {
            let (name, value) = setting.split_once('=').expect("Environment=NAME=VALUE");
            into.env.push((name.to_owned(), fill(value.trim_matches('"'))));
        }
    }
}

/// Kubernetes manifests: the `needle.toml` of a ConfigMap, each container's `args` and `env`
/// (a `fieldRef` given what Kubernetes would give, `$(NAME)` expanded as it does).
fn read_kubernetes(manifests: &str, into: &mut Deployment) {
    let lines: Vec<&str> = manifests.lines().collect();
    let indent = |line: &str| line.len() - line.trim_start().len();
    let mut env: Vec<(String, String)> = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        let trimmed = line.trim();
        if trimmed == "needle.toml: |" {
            let inside: Vec<&str> = lines[at + 1..]
                .iter()
                .take_while(|l| l.trim().is_empty() || indent(l) > indent(line))
                .copied()
                .collect();
            let margin = inside.iter().filter(|l| !l.trim().is_empty()).map(|l| indent(l)).min();
            let text: Vec<&str> =
                inside.iter().map(|l| l.get(margin.unwrap_or(0)..).unwrap_or("")).collect();
            into.configs.push(text.join("\n"));
        } else if let Some(args) = trimmed.strip_prefix("args:") {
            let args: Vec<String> = serde_json::from_str(args.trim()).expect("args as a list");
            assert_eq!(args.first().map(String::as_str), Some("serve"), "{args:?}");
            into.commands.push(args);
            env.clear(); // each container's variables are its own
        } else if let Some(name) = trimmed.strip_prefix("- name: ").filter(|n| is_variable(n)) {
            let next = lines.get(at + 1).map_or("", |l| l.trim());
            let value = if let Some(value) = next.strip_prefix("value: ") {
                let mut value = value.trim_matches('"').to_owned();
                for (known, given) in &env {
                    value = value.replace(&format!("$({known})"), given);
                }
                value
            } else {
                let field = lines[at..].iter().find_map(|l| l.trim().strip_prefix("fieldPath: "));
                match field {
                    Some("metadata.name") => "needle-api-7c9d8f6b5-x2k4q".to_owned(),
                    Some("status.podIP") => "10.1.2.3".to_owned(),
                    other => panic!("{name}: a value from {other:?}"),
                }
            };
            env.push((name.to_owned(), value.clone()));
            into.env.push((name.to_owned(), value));
        }
    }
}

/// Whether `name` (of a `- name:` line) is an environment variable's: containers, ports and
/// volumes have lower-case names.
fn is_variable(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_uppercase())
        && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

fn deployment() -> Deployment {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/deploy.md");
    let markdown = std::fs::read_to_string(&path).expect("docs/deploy.md");
    let mut deployment = Deployment::default();
    for (language, text) in blocks(&markdown) {
        match language.as_str() {
            "toml" => deployment.configs.push(text),
            "ini" => read_systemd(&text, &mut deployment),
            "yaml" => read_kubernetes(&text, &mut deployment),
            _ => {}
        }
    }
    deployment
}

/// `needle config` with `config` as its file and `env` set: its output, or why it failed.
fn needle_config(config: &str, env: &[(String, String)]) -> Result<String, String> {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, config.as_bytes()).unwrap();
    let mut command = Command::new(NEEDLE);
    command.args(["config", "--config"]).arg(file.path());
    for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("NEEDLE_")) {
        command.env_remove(key);
    }
    let out = command.envs(env.iter().map(|(k, v)| (k, v))).output().unwrap();
    match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

#[test]
fn the_deployment_docs_hold_two_configs_four_command_lines_and_needle_s_variables() {
    // a parse that found nothing would check nothing
    let deployment = deployment();
    assert_eq!(deployment.configs.len(), 2, "/etc/needle/needle.toml and the ConfigMap's");
    assert_eq!(deployment.commands.len(), 4, "{:?}", deployment.commands);
    let names: Vec<&str> = deployment.env.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "NEEDLE_KAFKA__NODE_ID",
            "NEEDLE_KAFKA__NODE_ID",
            "NEEDLE_SERVER__ADVERTISED_URL",
            "NEEDLE_KAFKA__NODE_ID",
            "POD_IP",
            "NEEDLE_KAFKA__NODE_ID",
            "NEEDLE_SERVER__ADVERTISED_URL"
        ]
    );
    let advertised: Vec<&str> = deployment
        .env
        .iter()
        .filter(|(k, _)| k == "NEEDLE_SERVER__ADVERTISED_URL")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(advertised, ["http://node-1.example.com:9900", "http://10.1.2.3:9900"]);
}

#[test]
fn the_deployment_docs_configs_load_and_their_variables_and_flags_are_needle_s() {
    let deployment = deployment();
    let (first, ..) = deployment.configs.split_first().expect("a needle.toml");
    let mut in_force = Vec::new();
    for config in &deployment.configs {
        let printed = needle_config(config, &[]).unwrap_or_else(|e| panic!("{e}\n{config}"));
        assert!(printed.contains("brokers = \"kafka-0.kafka:9092"), "{printed}");
        assert!(printed.contains("listen = \"0.0.0.0:9900\""), "{printed}");
        in_force.push(printed);
    }
    assert_eq!(in_force[0], in_force[1], "the machines and the ConfigMap read the same settings");
    for (name, value) in deployment.env.iter().filter(|(k, _)| k.starts_with("NEEDLE_")) {
        let env = [(name.clone(), value.clone())];
        let printed = needle_config(first, &env).unwrap_or_else(|e| panic!("{name}={value}: {e}"));
        let setting = name["NEEDLE_".len()..].split_once("__").expect("a section").1;
        let line = format!("{} = \"{value}\"", setting.to_lowercase());
        assert!(printed.contains(&line), "{name}={value} is not in force:\n{printed}");
        if name == "NEEDLE_KAFKA__NODE_ID" {
            let legal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
            assert!((1..=64).contains(&value.len()) && value.chars().all(legal), "{value}");
        }
    }
    let help = Command::new(NEEDLE).args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for command in &deployment.commands {
        assert_eq!(command.first().map(String::as_str), Some("serve"), "{command:?}");
        for (at, word) in command.iter().enumerate().filter(|(_, w)| w.starts_with("--")) {
            assert!(help.contains(&format!("{word} ")), "needle serve takes no {word}");
            if word == "--role" {
                let role = command.get(at + 1).map(String::as_str);
                assert!(matches!(role, Some("worker" | "api")), "{command:?}");
            }
        }
    }
}
