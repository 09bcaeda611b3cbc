//! Hostile: lies on its outcome board (`progress.share-outcomes`). Built with `wit-bindgen`
//! directly: the SDK writes the board as the contract says. What a call does is named by its
//! first record's data (a JSON string, quoted or not):
//!
//! | data        | what the component does                                          | the host must                                            |
//! |-------------|------------------------------------------------------------------|----------------------------------------------------------|
//! | `overcount` | acks every record on the board, count `u64::MAX`                 | read the batch's records only: all acked                 |
//! | `short`     | shares a board of one slot, acks it, counts the whole batch      | read one outcome; the next record is a failed attempt    |
//! | `rewind`    | acks record 0, then spins, its count going 1, 0, 1, 0, ...       | still stop it at its deadline (a rewind is no progress)  |
//! | `both`      | acks on the board and drops every record by `record-outcome` too | take the board, ignore the late reports: all acked       |

wit_bindgen::generate!({ path: "../../../wit", world: "batch-subscriber" });

use exports::ruststream::handler::batch;
use exports::ruststream::handler::handler::{App, AppInfo, CallInfo, Guest, Record, Subscription};
use ruststream::handler::progress;
use ruststream::handler::types::{FailureAction, HandlerOutcome};

/// One `records` entry (see `handle-batch` in the WIT).
const ENTRY: usize = 44;
const ACK: u64 = 1;

struct HostileBoard;

impl Guest for HostileBoard {
    fn describe() -> App {
        App {
            info: AppInfo {
                name: "hostile-board".to_owned(),
                version: "0.1.0".to_owned(),
            },
            subscriptions: vec![Subscription {
                name: "board".to_owned(),
                stream: "hostile".to_owned(),
                max_attempts: None,
                dead_letter: None,
                start: None,
                on_trap: FailureAction::Drop,
                batch_limit: None,
            }],
        }
    }

    /// Never called: the host calls `handle-batch` when a component exports it.
    fn handle(_info: CallInfo, _record: Record) -> HandlerOutcome {
        HandlerOutcome::Ack
    }
}

impl batch::Guest for HostileBoard {
    fn handle_batch(_info: CallInfo, arena: Vec<u8>, records: Vec<u8>, _headers: Vec<u8>) {
        let count = records.len() / ENTRY;
        let data = first_data(&arena, &records);
        // Test apps publish JSON: `"short"` names the mode `short`.
        let mode = data
            .strip_prefix(b"\"")
            .and_then(|d| d.strip_suffix(b"\""))
            .unwrap_or(data);
        match mode {
            b"overcount" => {
                let mut board = vec![ACK; count + 1];
                progress::share_outcomes(&board);
                set(&mut board, 0, u64::MAX);
                keep(board);
            }
            b"short" => {
                let mut board = vec![0; 2];
                progress::share_outcomes(&board);
                set(&mut board, 1, ACK);
                set(&mut board, 0, count as u64);
                keep(board);
            }
            b"rewind" => {
                let mut board = vec![0; count + 1];
                progress::share_outcomes(&board);
                set(&mut board, 1, ACK);
                let mut reported = 1;
                loop {
                    set(&mut board, 0, reported);
                    reported ^= 1;
                }
            }
            _ => {
                let mut board = vec![ACK; count + 1];
                progress::share_outcomes(&board);
                set(&mut board, 0, count as u64);
                for index in 0..count as u32 {
                    progress::record_outcome(index, HandlerOutcome::Drop);
                }
                keep(board);
            }
        }
    }
}

/// The first record's data.
fn first_data<'a>(arena: &'a [u8], records: &[u8]) -> &'a [u8] {
    let field = |at: usize| {
        records
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u32::from_le_bytes) as usize
    };
    let (start, len) = (field(0), field(4));
    arena.get(start..start + len).unwrap_or_default()
}

/// Leaves the board allocated: the host reads it after the call returns.
fn keep(board: Vec<u64>) {
    std::mem::forget(board);
}

/// Writes a slot as the host may read it at any time: when written, in order.
fn set(board: &mut [u64], slot: usize, value: u64) {
    // SAFETY: `board[slot]` is a valid, aligned, exclusive reference (indexing checks bounds).
    unsafe { std::ptr::write_volatile(&mut board[slot], value.to_le()) }
}

export!(HostileBoard);
