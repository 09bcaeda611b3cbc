//! Components run by `TestApp`: in-process streams in paused time, the real runtime; and
//! `ruststream dev`, the binary running them so for a tenant developer.

mod adapter;
mod board;
mod chains;
mod copies;
mod deadlines;
mod dev;
mod holds;
mod limits;
mod polyglot;
mod settlement;
mod streams;
mod swap;
