//! A host whose clock runs ahead of Kinesis, as seen by the stream: a Kinesis client that
//! moves every time it asks for (an `AT_TIMESTAMP` iterator) later by a fixed amount before it
//! reaches the local server. A time the host takes from its clock then lands that much after
//! the arrival times Kinesis gave its records, exactly as with a host clock that is ahead;
//! sequence numbers and every other request pass unchanged.

use std::time::Duration;

use aws_sdk_kinesis::operation::get_shard_iterator::GetShardIteratorInput;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextMut;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::DateTime;
use aws_smithy_types::config_bag::ConfigBag;

/// A client of the local Kinesis server at `endpoint` for a host whose clock is `ahead` of
/// the stream's.
pub async fn kinesis_client_ahead(endpoint: &str, ahead: Duration) -> aws_sdk_kinesis::Client {
    let config = crate::servers::sdk_config(endpoint).await;
    let config = aws_sdk_kinesis::config::Builder::from(&config)
        .interceptor(Ahead(ahead))
        .build();
    aws_sdk_kinesis::Client::from_conf(config)
}

#[derive(Debug, Clone, Copy)]
struct Ahead(Duration);

impl Intercept for Ahead {
    fn name(&self) -> &'static str {
        "ruststream-tests::skew"
    }

    fn modify_before_serialization(
        &self,
        context: &mut BeforeSerializationInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(input) = context.input_mut().downcast_mut::<GetShardIteratorInput>()
            && let Some(at) = input.timestamp
        {
            let ms = at.to_millis()? + i64::try_from(self.0.as_millis())?;
            input.timestamp = Some(DateTime::from_millis(ms));
        }
        Ok(())
    }
}
