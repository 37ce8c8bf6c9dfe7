//! A panic whose message holds a secret needle has read is printed with the secret redacted
//! (`secrets::scrub_panic_messages`). The test runs itself again as a child process that panics,
//! since a panic hook is the whole process's.

use needle_runtime::secrets;
use std::process::Command;

const CHILD: &str = "NEEDLE_TEST_PANIC_CHILD";
const SECRET: &str = "panicky-secret-6d0e";

#[test]
fn a_panic_message_shows_no_secret() {
    if std::env::var_os(CHILD).is_some() {
        secrets::remember(SECRET);
        secrets::scrub_panic_messages();
        panic!("cannot connect with the password {SECRET}");
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "a_panic_message_shows_no_secret", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let printed =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "the child panicked: {printed}");
    assert!(printed.contains("cannot connect with the password <redacted>"), "{printed}");
    assert!(!printed.contains(SECRET), "{printed}");
}

#[test]
fn a_panic_without_a_secret_is_printed_as_ever() {
    if std::env::var_os(CHILD).is_some() {
        secrets::remember(SECRET);
        secrets::scrub_panic_messages();
        panic!("nothing secret here");
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_panic_without_a_secret_is_printed_as_ever",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("panicked at") && stderr.contains("nothing secret here"), "{stderr}");
}
