//! The `tcp:` source: a listener on `HOST:PORT`; every client that connects sends
//! newline-delimited records, each client on its own thread with its own line framing, all into
//! the same bounded queue (so a fast client cannot starve the workers of the others' records
//! beyond its share of the queue).
//!
//! `?format=` says what the lines are: `json` (NDJSON records, the default), or a metrics
//! agent's protocol, `influx` (InfluxDB line protocol; `&precision=ns|us|ms|s`, `ns` by
//! default), `opentsdb` (telnet `put` lines) or `graphite` (plaintext). A protocol's lines are
//! turned into JSON records on the client's thread ([`super::protocol`]) before they are handed
//! on, so the workers and history read them as any other lines.

use super::protocol::{self, Converter};
use super::{flush_last_line_converted, pump, split_query, BatchSink, Source, SourceOptions};
use crate::framing::{Batch, LineFramer};
use crate::RuntimeError;
use needle_protocols::{Format, Precision};
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

pub struct TcpSource {
    listener: TcpListener,
    options: SourceOptions,
    /// The protocol the clients' lines are in; `None` for JSON lines.
    format: Option<Format>,
}

impl TcpSource {
    /// `HOST:PORT` (port 0 picks a free port; see [`TcpSource::local_addr`]); clients send
    /// JSON lines.
    pub fn bind(addr: &str, options: &SourceOptions) -> Result<Self, RuntimeError> {
        let listener = TcpListener::bind(addr)
            .map_err(|e| RuntimeError::io(format!("listening on {addr}"), e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| RuntimeError::io(format!("listening on {addr}"), e))?;
        Ok(Self { listener, options: options.clone(), format: None })
    }

    /// Clients send lines of `format` (`None`: JSON lines).
    pub fn with_format(mut self, format: Option<Format>) -> Self {
        self.format = format;
        self
    }

    /// `HOST:PORT[?format=json|influx|opentsdb|graphite][&precision=ns|us|ms|s]`.
    pub fn from_spec(rest: &str, options: &SourceOptions) -> Result<Box<dyn Source>, RuntimeError> {
        let spec = format!("tcp:{rest}");
        let (addr, params) = split_query(rest);
        if addr.parse::<SocketAddr>().is_err() && !addr.contains(':') {
            return Err(RuntimeError::bad_source(
                &spec,
                "give an address to listen on: tcp:127.0.0.1:9901",
            ));
        }
        let mut format = None;
        let mut precision = None;
        for (key, value) in params {
            match key {
                "format" if value == "json" => format = None,
                "format" => {
                    let known = format!("json, {}", Format::NAMES);
                    format = Some(Format::parse(value).map_err(|_| {
                        RuntimeError::bad_source(
                            &spec,
                            format!("unknown format '{value}' (known: {known})"),
                        )
                    })?);
                }
                "precision" => {
                    precision = Some(
                        Precision::parse(value)
                            .map_err(|e| RuntimeError::bad_source(&spec, e.to_string()))?,
                    );
                }
                other => {
                    return Err(RuntimeError::bad_source(
                        &spec,
                        format!("unknown option '{other}' (known: format, precision)"),
                    ))
                }
            }
        }
        match (format, precision) {
            (Some(Format::Influx(_)), Some(precision)) => format = Some(Format::Influx(precision)),
            (_, Some(_)) => {
                return Err(RuntimeError::bad_source(
                    &spec,
                    "precision is line protocol's: it goes with format=influx",
                ))
            }
            _ => {}
        }
        Ok(Box::new(Self::bind(addr, options)?.with_format(format)))
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }
}

impl Source for TcpSource {
    fn describe(&self) -> String {
        // the address stays the last word: scripts and tests read it there
        let format = match self.format {
            Some(Format::Influx(precision)) => format!(" for influx lines ({})", precision.name()),
            Some(format) => format!(" for {} lines", format.name()),
            None => String::new(),
        };
        match self.local_addr() {
            Some(addr) => format!("tcp listener{format} on {addr}"),
            None => format!("tcp listener{format}"),
        }
    }

    fn run(self: Box<Self>, sink: BatchSink) -> Result<(), RuntimeError> {
        let mut clients = Vec::new();
        while !sink.is_stopped() {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    let sink = sink.clone();
                    let options = self.options.clone();
                    let format = self.format;
                    let serve = move || serve_client(stream, peer, sink, options, format);
                    match std::thread::Builder::new().name("needle-tcp-client".into()).spawn(serve)
                    {
                        Ok(client) => clients.push(client),
                        // out of threads: that client's connection is dropped, the others go on
                        Err(e) => {
                            eprintln!("needle: tcp source: a client could not be served: {e}")
                        }
                    }
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
fn serve_client(
    stream: TcpStream,
    peer: SocketAddr,
    sink: BatchSink,
    options: SourceOptions,
    format: Option<Format>,
) {
    // Blocking reads with a timeout, so a silent client notices the stop signal.
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let mut framer = LineFramer::new(options.max_line_bytes);
    let mut reader = TimeoutTolerant { stream, sink: sink.clone() };
    let context = format!("reading from tcp client {peer}");
    let mut converter =
        format.map(|format| Converter::new(format, sink.clone(), format!("tcp client {peer}")));
    let read = match &mut converter {
        Some(converter) => {
            protocol::pump(&mut reader, &mut framer, converter, options.read_bytes, &context)
        }
        None => pump(&mut reader, &mut framer, &sink, options.read_bytes, &context),
    };
    let mut convert = |batch: Batch| match &mut converter {
        Some(converter) => converter.convert(batch),
        None => Some(batch),
    };
    if let Ok(true) = read {
        flush_last_line_converted(&mut framer, &sink, &mut convert);
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
    fn a_protocol_client_s_points_arrive_as_json_records_past_its_malformed_lines() {
        let options = SourceOptions::default();
        let source = TcpSource::from_spec("127.0.0.1:0?format=opentsdb", &options).unwrap();
        let described = source.describe();
        assert!(
            described.starts_with("tcp listener for opentsdb lines on 127.0.0.1:"),
            "{described}"
        );
        let source = TcpSource::bind("127.0.0.1:0", &options)
            .unwrap()
            .with_format(Some(Format::Influx(Precision::Milliseconds)));
        let addr = source.local_addr().unwrap();
        let (sink, rx, stop, counters) = sink(100);
        let server = std::thread::spawn(move || Box::new(source).run(sink));
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(
            b"cpu,host=a usage=1 1700000000000
broken
cpu,host=b usage=2 17000",
        )
        .unwrap();
        s.flush().unwrap();
        // the last point has no newline, and is cut across writes
        s.write_all(b"00000001").unwrap();
        drop(s);
        let mut lines = Vec::new();
        while lines.len() < 2 {
            let batch = rx.recv_timeout(Duration::from_secs(5)).expect("the points arrive");
            lines.extend(lines_of([batch]));
        }
        stop.stop();
        server.join().unwrap().unwrap();
        assert_eq!(
            lines,
            [
                r#"{"measurement":"cpu","host":"a","usage":1.0,"timestamp":1700000000000}"#,
                r#"{"measurement":"cpu","host":"b","usage":2.0,"timestamp":1700000000001}"#,
            ]
        );
        assert_eq!(counters.malformed.get(), 1);
    }

    #[test]
    fn formats_and_precisions_are_checked_with_the_choices_named() {
        let options = SourceOptions::default();
        let refused = |spec: &str| TcpSource::from_spec(spec, &options).err().unwrap().to_string();
        let err = refused("127.0.0.1:0?format=statsd");
        assert!(
            err.contains("unknown format 'statsd' (known: json, influx, opentsdb, graphite)"),
            "{err}"
        );
        let err = refused("127.0.0.1:0?format=influx&precision=h");
        assert!(err.contains("unknown precision 'h' (known: ns, us, ms, s)"), "{err}");
        let err = refused("127.0.0.1:0?format=graphite&precision=s");
        assert!(err.contains("goes with format=influx"), "{err}");
        let err = refused("127.0.0.1:0?follow=true");
        assert!(err.contains("unknown option 'follow' (known: format, precision)"), "{err}");
        for spec in ["127.0.0.1:0?format=json", "127.0.0.1:0?format=influx&precision=s"] {
            assert!(TcpSource::from_spec(spec, &options).is_ok(), "{spec}");
        }
        let influx = TcpSource::from_spec("127.0.0.1:0?precision=us&format=influx", &options);
        assert!(influx.unwrap().describe().starts_with("tcp listener for influx lines (us) on "));
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
