//! The `stdin` source: standard input, read to its end.

use super::{flush_last_line, pump, BatchSink, Source, SourceOptions};
use crate::framing::LineFramer;
use crate::RuntimeError;

pub struct StdinSource {
    options: SourceOptions,
}

impl StdinSource {
    pub fn from_spec(rest: &str, options: &SourceOptions) -> Result<Box<dyn Source>, RuntimeError> {
        if !rest.is_empty() {
            return Err(RuntimeError::bad_source(
                &format!("stdin:{rest}"),
                "stdin takes no arguments",
            ));
        }
        Ok(Box::new(Self { options: options.clone() }))
    }
}

impl Source for StdinSource {
    fn describe(&self) -> String {
        "stdin".into()
    }

    fn run(self: Box<Self>, sink: BatchSink) -> Result<(), RuntimeError> {
        let mut framer = LineFramer::new(self.options.max_line_bytes);
        let stdin = std::io::stdin();
        let mut lock = stdin.lock();
        if pump(&mut lock, &mut framer, &sink, self.options.read_bytes, "reading stdin")? {
            flush_last_line(&mut framer, &sink);
        }
        Ok(())
    }
}
