//! The host and the `ruststream` binary against local Kinesis and DynamoDB servers.

/// Runs each named scenario, an `async fn(ReadMode) -> anyhow::Result<()>` of the module, once
/// per read mode: as `polling::<name>` and `fan_out::<name>`. The settlement rules, holds,
/// copies, checkpoints and seeks are the same whether a shard is polled or pushed.
macro_rules! in_both_read_modes {
    ($($scenario:ident),* $(,)?) => {
        mod polling {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() -> anyhow::Result<()> {
                    super::$scenario(ruststream_kinesis::kinesis::ReadMode::Polling).await
                }
            )*
        }
        mod fan_out {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() -> anyhow::Result<()> {
                    super::$scenario(ruststream_kinesis::kinesis::ReadMode::FanOut).await
                }
            )*
        }
    };
}

mod admin;
mod binary;
mod chaos;
mod config;
mod contract;
mod cpu;
mod dead_letters;
mod desired;
mod fan_out;
mod fleet_deploys;
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
/// Shared with the console's browser test of the redrive action.
pub(crate) mod redrive;
mod resilience;
mod sandbox;
mod servers;
mod service_load;
mod shadow;
mod shared_stream;
mod test_verb;
