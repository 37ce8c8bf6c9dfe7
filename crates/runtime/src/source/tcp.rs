//! The `tcp:` source: a listener on `HOST:PORT`; every client that connects sends
//! newline-delimited records, each client on its own thread with its own line framing, all into
//! the same bounded queue (so a fast client cannot starve the workers of the others' records
//! beyond its share of the queue).

use super::{flush_last_line, pump, BatchSink, Source, SourceOptions};
use crate::framing::LineFramer;
use crate::RuntimeError;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

pub struct TcpSource {
    listener: TcpListener,
    options: SourceOptions,
}

impl TcpSource {
    /// `HOST:PORT` (port 0 picks a free port; see [`TcpSource::local_addr`]).
    pub fn bind(addr: &str, options: &SourceOptions) -> Result<Self, RuntimeError> {
        let listener = TcpListener::bind(addr)
            .map_err(|e| RuntimeError::io(format!("listening on {addr}"), e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| RuntimeError::io(format!("listening on {addr}"), e))?;
        Ok(Self { listener, options: options.clone() })
    }

    pub fn from_spec(rest: &str, options: &SourceOptions) -> Result<Box<dyn Source>, RuntimeError> {
        if rest.parse::<SocketAddr>().is_err() && !rest.contains(':') {
            return Err(RuntimeError::bad_source(
                &format!("tcp:{rest}"),
                "give an address to listen on: tcp:127.0.0.1:9901",
            ));
        }
        Ok(Box::new(Self::bind(rest, options)?))
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }
}

impl Source for TcpSource {
    fn describe(&self) -> String {
        match self.local_addr() {
            Some(addr) => format!("tcp listener on {addr}"),
            None => "tcp listener".into(),
        }
    }

    fn run(self: Box<Self>, sink: BatchSink) -> Result<(), RuntimeError> {
        let mut clients = Vec::new();
        while !sink.is_stopped() {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    let sink = sink.clone();
                    let options = self.options.clone();
                    clients.push(std::thread::spawn(move || {
                        serve_client(stream, peer, sink, options)
                    }));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // A failed accept (a client that reset at once, out of descriptors) is not the
                // end of the listener.
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
            clients.retain(|c| !c.is_finished());
        }
        for client in clients {
            let _ = client.join();
        }
        Ok(())
    }
}

/// Reads one client until it hangs up or the runtime stops. A client's I/O error ends that
/// client only.
fn serve_client(stream: TcpStream, peer: SocketAddr, sink: BatchSink, options: SourceOptions) {
    // Blocking reads with a timeout, so a silent client notices the stop signal.
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let mut framer = LineFramer::new(options.max_line_bytes);
    let mut reader = TimeoutTolerant { stream, sink: sink.clone() };
    let context = format!("reading from tcp client {peer}");
    if let Ok(true) = pump(&mut reader, &mut framer, &sink, options.read_bytes, &context) {
        flush_last_line(&mut framer, &sink);
    }
}

/// A socket reader whose read timeouts are retried until the runtime stops (then it reports the
/// end of the stream).
struct TimeoutTolerant {
    stream: TcpStream,
    sink: BatchSink,
}

impl std::io::Read for TimeoutTolerant {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match self.stream.read(buf) {
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if self.sink.is_stopped() {
                        return Ok(0);
                    }
                }
                other => return other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{lines_of, sink};
    use super::*;
    use std::io::Write;

    #[test]
    fn many_clients_each_deliver_all_their_lines() {
        let source = TcpSource::bind("127.0.0.1:0", &SourceOptions::default()).unwrap();
        let addr = source.local_addr().unwrap();
        let (sink, rx, stop, _) = sink(10_000);
        let server = std::thread::spawn(move || Box::new(source).run(sink));
        let clients: Vec<_> = (0..3)
            .map(|c| {
                std::thread::spawn(move || {
                    let mut s = TcpStream::connect(addr).unwrap();
                    for i in 0..500 {
                        // Split a line across writes now and then.
                        if i % 50 == 0 {
                            s.write_all(format!("{{\"c\":{c},").as_bytes()).unwrap();
                            s.flush().unwrap();
                            s.write_all(format!("\"i\":{i}}}\n").as_bytes()).unwrap();
                        } else {
                            s.write_all(format!("{{\"c\":{c},\"i\":{i}}}\n").as_bytes()).unwrap();
                        }
                    }
                    // The last line has no newline: it counts when the client hangs up.
                    s.write_all(format!("{{\"c\":{c},\"end\":1}}").as_bytes()).unwrap();
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
        let mut lines = Vec::new();
        while lines.len() < 1503 {
            let batch = rx.recv_timeout(Duration::from_secs(5)).expect("all lines arrive");
            lines.extend(lines_of([batch]));
        }
        stop.stop();
        server.join().unwrap().unwrap();
        for c in 0..3 {
            let mine: Vec<_> =
                lines.iter().filter(|l| l.starts_with(&format!("{{\"c\":{c},"))).collect();
            assert_eq!(mine.len(), 501, "client {c}");
            assert_eq!(mine[77], &format!("{{\"c\":{c},\"i\":77}}"));
        }
    }

    #[test]
    fn a_taken_port_is_a_clear_error() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap().to_string();
        let err = TcpSource::from_spec(&addr, &SourceOptions::default()).err().unwrap();
        assert!(err.to_string().contains(&format!("listening on {addr}")), "{err}");
        assert!(TcpSource::from_spec("nonsense", &SourceOptions::default()).is_err());
    }
}
