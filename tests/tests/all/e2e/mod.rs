//! The host and the `ruststream` binary against local Kinesis and DynamoDB servers.

mod admin;
mod binary;
mod chaos;
mod config;
mod contract;
mod cpu;
mod dead_letters;
mod fan_out;
mod fleet_reads;
mod hotload;
mod identity;
mod kinesis;
mod kinesis_copies;
mod native_streams;
mod operate;
mod polyglot;
mod put_tail;
mod reads;
mod redrive;
mod resilience;
mod sandbox;
mod servers;
mod service_load;
mod shadow;
mod shared_stream;
mod test_verb;
