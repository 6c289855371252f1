//! A metric family that `/metrics` lists before its first series.
use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;

/// A labelled family encoded even while it has no series, so its HELP and TYPE say it exists
/// from the start, as they always did here (prometheus-client leaves out a family without
/// series), and a family no test observes still shows in the exposition.
#[derive(Debug)]
pub(crate) struct Declared<M>(pub(crate) M);

impl<M: EncodeMetric> EncodeMetric for Declared<M> {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }
}
