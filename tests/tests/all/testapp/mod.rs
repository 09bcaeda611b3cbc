//! Components run by `TestApp`: in-process streams in paused time, the real runtime.

mod copies;
mod deadlines;
mod holds;
mod limits;
mod settlement;
mod swap;
