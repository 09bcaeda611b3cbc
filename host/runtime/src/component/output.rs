//! What a component writes: its stdout and stderr, captured, and the caps on its log output.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

use crate::limits::LogLimits;
use crate::log::LogRate;
use ruststream_common::sync::lock;

/// Largest write a guest is invited to make at once.
const WRITE_PERMIT: usize = 64 << 10;

/// A guest's stdout or stderr, kept in memory until the host turns it into log lines.
///
/// Writes never fail (Rust's `println!` panics on a failed write, which would turn chattiness
/// into a trap): bytes past the cap are dropped and counted instead.
#[derive(Clone, Default)]
pub(crate) struct OutputCapture {
    inner: Arc<Mutex<Captured>>,
}

#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    cap: usize,
    dropped: usize,
}

impl OutputCapture {
    /// Empties the buffer and sets how much the next call may write.
    pub(crate) fn start_call(&self, cap: usize) {
        let mut captured = self.lock();
        captured.bytes.clear();
        captured.cap = cap;
        captured.dropped = 0;
    }

    /// Takes what was written since [`start_call`](Self::start_call), and how many bytes were
    /// dropped past the cap.
    pub(crate) fn take(&self) -> (Vec<u8>, usize) {
        let mut captured = self.lock();
        let dropped = std::mem::take(&mut captured.dropped);
        (std::mem::take(&mut captured.bytes), dropped)
    }

    fn write(&self, bytes: &[u8]) {
        let mut captured = self.lock();
        let room = captured.cap.saturating_sub(captured.bytes.len());
        let kept = bytes.len().min(room);
        captured.bytes.extend_from_slice(&bytes[..kept]);
        captured.dropped += bytes.len() - kept;
    }

    fn lock(&self) -> MutexGuard<'_, Captured> {
        lock(&self.inner)
    }
}

impl IsTerminal for OutputCapture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for OutputCapture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for OutputCapture {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        OutputCapture::write(self, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

impl Pollable for OutputCapture {
    fn ready<'a, 'async_trait>(
        &'a mut self,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'async_trait>>
    where
        'a: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(std::future::ready(()))
    }
}

impl tokio::io::AsyncWrite for OutputCapture {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.write(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// What one call may still log, and what it had to drop.
#[derive(Debug, Default)]
pub(crate) struct LogBudget {
    lines_left: u64,
    bytes_left: usize,
    pub dropped_lines: u64,
    pub dropped_bytes: usize,
}

impl LogBudget {
    /// The budget of a call handling `records` records.
    pub(crate) fn for_call(limits: &LogLimits, records: usize) -> Self {
        Self {
            lines_left: limits.call_lines(records),
            bytes_left: limits.call_bytes(records),
            dropped_lines: 0,
            dropped_bytes: 0,
        }
    }

    /// Whether a line of `bytes` bytes may be logged (and spends it if so).
    pub(crate) fn spend(&mut self, bytes: usize, rate: &LogRate) -> bool {
        if self.lines_left == 0 || bytes > self.bytes_left || !rate.take() {
            self.dropped_lines += 1;
            self.dropped_bytes += bytes;
            return false;
        }
        self.lines_left -= 1;
        self.bytes_left -= bytes;
        true
    }

    pub(crate) fn dropped_any(&self) -> bool {
        self.dropped_lines > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_past_the_cap_are_dropped_and_counted() {
        let capture = OutputCapture::default();
        capture.start_call(8);
        capture.write(b"hello ");
        capture.write(b"world");
        assert_eq!(capture.take(), (b"hello wo".to_vec(), 3));
        assert_eq!(capture.take(), (Vec::new(), 0));
    }

    #[test]
    fn a_budget_counts_lines_and_bytes_per_record() {
        let limits = LogLimits {
            lines_per_record: 2,
            bytes_per_record: 10,
            ..LogLimits::default()
        };
        let rate = LogRate::new(1000);
        let mut budget = LogBudget::for_call(&limits, 2);
        assert!(budget.spend(5, &rate));
        assert!(budget.spend(15, &rate));
        assert!(!budget.spend(1, &rate), "20 bytes spent");
        assert!(budget.spend(0, &rate));
        assert!(budget.spend(0, &rate));
        assert!(!budget.spend(0, &rate), "4 lines spent");
        assert_eq!((budget.dropped_lines, budget.dropped_bytes), (2, 1));
    }

    #[test]
    fn a_call_of_many_records_is_capped_in_total() {
        let limits = LogLimits::default();
        let budget = LogBudget::for_call(&limits, 10_000);
        assert_eq!(budget.bytes_left, limits.bytes_per_call);
        assert_eq!(budget.lines_left, u64::from(limits.lines_per_call));
    }
}
