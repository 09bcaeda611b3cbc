//! What a component writes: its stdout and stderr, captured, and the caps on its log output.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

use super::progress::CallProgress;
use crate::limits::LogLimits;
use crate::log::LogRate;
use ruststream_common::sync::lock;

/// Bytes a call wrote, with the index of the record under way as they were written, when the
/// capture noted it.
pub(crate) type Written = (Option<usize>, Vec<u8>);

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
    /// The call's progress, when what it writes is split by record as it goes.
    progress: Option<CallProgress>,
    /// Where each record's output starts: the record's index in the call, and the offset in
    /// `bytes`, in order.
    marks: Vec<(usize, usize)>,
}

impl OutputCapture {
    /// Empties the buffer and sets how much the next call may write. With `progress`, each
    /// write is noted as the output of the record `progress` shows under way.
    pub(crate) fn start_call(&self, cap: usize, progress: Option<CallProgress>) {
        let mut captured = self.lock();
        captured.bytes.clear();
        captured.cap = cap;
        captured.dropped = 0;
        captured.progress = progress;
        captured.marks.clear();
    }

    /// Takes what was written since [`start_call`](Self::start_call), split by record (each
    /// part with the index of the record under way when it was written, if the call is
    /// split), and how many bytes were dropped past the cap.
    pub(crate) fn take_by_record(&self) -> (Vec<Written>, usize) {
        let mut captured = self.lock();
        let dropped = std::mem::take(&mut captured.dropped);
        let mut bytes = std::mem::take(&mut captured.bytes);
        let marks = std::mem::take(&mut captured.marks);
        // Nothing allocated for a call that wrote nothing: the host takes the output of each
        // record of a run of `handle` calls.
        let mut parts = Vec::new();
        for &(record, start) in marks.iter().rev() {
            parts.push((Some(record), bytes.split_off(start.min(bytes.len()))));
        }
        if !bytes.is_empty() {
            parts.push((None, bytes));
        }
        parts.reverse();
        (parts, dropped)
    }

    fn write(&self, bytes: &[u8]) {
        let mut captured = self.lock();
        if let Some(record) = captured
            .progress
            .as_ref()
            .map(CallProgress::reported_so_far)
            && captured.marks.last().map(|&(last, _)| last) != Some(record)
        {
            let start = captured.bytes.len();
            captured.marks.push((record, start));
        }
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
        capture.start_call(8, None);
        capture.write(b"hello ");
        capture.write(b"world");
        assert_eq!(
            capture.take_by_record(),
            (vec![(None, b"hello wo".to_vec())], 3)
        );
        assert_eq!(capture.take_by_record(), (Vec::new(), 0));
    }

    #[test]
    fn writes_are_split_by_the_record_under_way() {
        let capture = OutputCapture::default();
        let progress = CallProgress::new(std::time::Duration::from_secs(5), Default::default());
        capture.start_call(64, Some(progress.clone()));
        capture.write(b"a1\n");
        capture.write(b"a2\n");
        progress.reported(2);
        capture.write(b"c\n");
        let parts = vec![(Some(0), b"a1\na2\n".to_vec()), (Some(2), b"c\n".to_vec())];
        assert_eq!(capture.take_by_record(), (parts, 0));
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
