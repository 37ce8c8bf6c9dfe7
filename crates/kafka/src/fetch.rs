//! Reading the data topic's messages many at a time and in place: the Kafka source's message
//! queue, and the batch of messages it hands to the workers without copying their payloads.
//!
//! - **One queue for the messages** ([`MessageQueue`]): every partition the source is given has
//!   its fetch queue forwarded to a queue of the source's own, before it is assigned. The
//!   consumer's own queue then carries only the group's events (rebalances, commits, errors),
//!   which `BaseConsumer::poll` serves as before; messages are taken from the message queue
//!   with `rd_kafka_consume_batch_queue`, up to [`MessageQueue::consume`]'s `max` per call,
//!   instead of one poll (and one event, and one clock reading) per message.
//! - **Payloads read where they are** ([`Messages`]): the messages themselves go to the workers
//!   as the batch's [`Chunks`]; librdkafka's buffers are released when the batch drops.
//!   Copying every payload into one vector was half of the source thread's time (a fifth of
//!   a worker process's CPU), most of it cache misses and page faults.
//!
//! The unsafe code of the crate is here: librdkafka's queue and message handles. A message
//! keeps the consumer alive ([`Messages`] holds the source's shared state), so no message
//! outlives the client it came from.

use needle_runtime::framing::Chunks;
use rdkafka::bindings as rdsys;
use rdkafka::types::RDKafkaRespErr;
use std::any::Any;
use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Duration;

/// Messages asked of librdkafka per call at most.
const CALL_MAX: usize = 64;

/// A librdkafka queue of the source's own, into which the assigned partitions' fetch queues
/// are forwarded.
pub(crate) struct MessageQueue {
    queue: NonNull<rdsys::rd_kafka_queue_t>,
    client: NonNull<rdsys::rd_kafka_t>,
}

// SAFETY: librdkafka's queues are thread-safe (every operation takes the queue's lock), and the
// client handle is only passed to librdkafka's thread-safe calls.
unsafe impl Send for MessageQueue {}
unsafe impl Sync for MessageQueue {}

impl MessageQueue {
    /// A new queue on `client`.
    ///
    /// # Safety
    /// `client` must be a live consumer handle that outlives the queue.
    pub(crate) unsafe fn new(client: *mut rdsys::rd_kafka_t) -> Option<Self> {
        let client = NonNull::new(client)?;
        // SAFETY: `client` is live (the caller's promise).
        let queue = NonNull::new(unsafe { rdsys::rd_kafka_queue_new(client.as_ptr()) })?;
        Some(Self { queue, client })
    }

    /// Sends the partition's messages to this queue from now on (those already fetched too).
    /// Call it before the partition is assigned. False when librdkafka has no such partition.
    pub(crate) fn take_partition(&self, topic: &str, partition: i32) -> bool {
        let Ok(topic) = CString::new(topic) else { return false };
        // SAFETY: the client is live (see `new`); the partition queue handle is released just
        // below, the forwarding it set up stays.
        unsafe {
            let fetch = rdsys::rd_kafka_queue_get_partition(
                self.client.as_ptr(),
                topic.as_ptr(),
                partition,
            );
            if fetch.is_null() {
                return false;
            }
            rdsys::rd_kafka_queue_forward(fetch, self.queue.as_ptr());
            rdsys::rd_kafka_queue_destroy(fetch);
        }
        true
    }

    /// Appends up to `max` messages to `out`, waiting up to `wait` until `max` are there (so
    /// `max` = 1 returns with the first one); returns how many were appended.
    pub(crate) fn consume(&self, wait: Duration, max: usize, out: &mut Vec<Message>) -> usize {
        let mut got: [*mut rdsys::rd_kafka_message_t; CALL_MAX] = [std::ptr::null_mut(); CALL_MAX];
        let max = max.clamp(1, CALL_MAX);
        let wait_ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: `got` has room for `max` pointers; librdkafka fills the first n and hands
        // their ownership to us (each is destroyed once, by `Message`'s drop).
        let n = unsafe {
            rdsys::rd_kafka_consume_batch_queue(self.queue.as_ptr(), wait_ms, got.as_mut_ptr(), max)
        };
        let n = usize::try_from(n).unwrap_or(0).min(max);
        out.extend(got[..n].iter().filter_map(|&m| NonNull::new(m).map(Message)));
        n
    }
}

impl Drop for MessageQueue {
    fn drop(&mut self) {
        // SAFETY: the handle is ours; the partitions forwarded here hold their own reference
        // to the queue until they are stopped.
        unsafe { rdsys::rd_kafka_queue_destroy(self.queue.as_ptr()) }
    }
}

/// A message taken from the queue, destroyed when dropped.
pub(crate) struct Message(NonNull<rdsys::rd_kafka_message_t>);

// SAFETY: a consumed message is the application's: nothing else touches it until it is
// destroyed, which librdkafka allows from any thread; we only read it.
unsafe impl Send for Message {}
unsafe impl Sync for Message {}

impl Message {
    fn raw(&self) -> &rdsys::rd_kafka_message_t {
        // SAFETY: valid until dropped.
        unsafe { self.0.as_ref() }
    }

    pub(crate) fn partition(&self) -> i32 {
        self.raw().partition
    }

    pub(crate) fn offset(&self) -> i64 {
        self.raw().offset
    }

    /// An error librdkafka reports on a partition (then the message carries no record).
    pub(crate) fn error(&self) -> Option<RDKafkaRespErr> {
        let err = self.raw().err;
        (err != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR).then_some(err)
    }

    /// The value (empty for none).
    pub(crate) fn payload(&self) -> &[u8] {
        let raw = self.raw();
        if raw.payload.is_null() || raw.len == 0 {
            return &[];
        }
        // SAFETY: librdkafka's payload of `len` bytes, valid while the message lives.
        unsafe { std::slice::from_raw_parts(raw.payload as *const u8, raw.len) }
    }
}

impl Drop for Message {
    fn drop(&mut self) {
        // SAFETY: ours, destroyed once.
        unsafe { rdsys::rd_kafka_message_destroy(self.0.as_ptr()) }
    }
}

/// Messages handed to the workers in a batch, read in place. `alive` keeps whatever they came
/// from (the consumer) alive until they are destroyed: fields drop in order, messages first.
pub(crate) struct Messages {
    messages: Vec<Message>,
    _alive: Arc<dyn Any + Send + Sync>,
}

impl Messages {
    pub(crate) fn new(messages: Vec<Message>, alive: Arc<dyn Any + Send + Sync>) -> Self {
        Self { messages, _alive: alive }
    }
}

impl Chunks for Messages {
    fn count(&self) -> usize {
        self.messages.len()
    }

    fn chunk(&self, index: usize) -> &[u8] {
        self.messages[index].payload()
    }
}
