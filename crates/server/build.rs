//! Recompiles the crate when the built UI (`ui/dist`, embedded by `routes/ui.rs`) changes, or
//! appears: the embedding macro alone does not notice new files.

fn main() {
    let dist = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ui/dist");
    if dist.exists() {
        println!("cargo:rerun-if-changed=../../ui/dist");
    } else {
        // Watching a missing path would rerun every build; `ui` changes when `dist` appears.
        println!("cargo:rerun-if-changed=../../ui");
    }
}
