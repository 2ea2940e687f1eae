//! Typed metric label values: an enum per label, encoded as the snake_case strings the dashboards and
//! alerts already use, so a typo is a compile error and not a new time series.

/// Declare a label value enum with its encoded strings, e.g.
/// `label_value!(pub Outcome { Succeeded => "succeeded", Failed => "failed" });`
#[macro_export]
macro_rules! label_value {
    ($vis:vis $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name { $($variant),+ }

        impl $name {
            /// Every value, for series created at 0 at start.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl prometheus_client::encoding::EncodeLabelValue for $name {
            fn encode(
                &self,
                encoder: &mut prometheus_client::encoding::LabelValueEncoder,
            ) -> Result<(), std::fmt::Error> {
                std::fmt::Write::write_str(encoder, self.as_str())
            }
        }
    };
}

label_value!(pub Outcome { Succeeded => "succeeded", Failed => "failed" });
label_value!(pub Reload { Success => "success", Failure => "failure" });
label_value!(pub Eviction {
    Succeeded => "succeeded",
    PdbRefused => "pdb_refused",
    Failed => "failed",
    ForceDeleted => "force_deleted",
});

/// `{result="succeeded|failed"}`
#[derive(Debug, Clone, PartialEq, Eq, Hash, prometheus_client::encoding::EncodeLabelSet)]
pub struct OutcomeLabel {
    pub result: Outcome,
}

/// `{result="success|failure"}`
#[derive(Debug, Clone, PartialEq, Eq, Hash, prometheus_client::encoding::EncodeLabelSet)]
pub struct ReloadLabel {
    pub result: Reload,
}

/// `{result="succeeded|pdb_refused|failed|force_deleted"}`
#[derive(Debug, Clone, PartialEq, Eq, Hash, prometheus_client::encoding::EncodeLabelSet)]
pub struct EvictionLabel {
    pub result: Eviction,
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;

    #[test]
    fn label_values_encode_as_their_strings() {
        let f: Family<EvictionLabel, Counter> = Family::default();
        f.get_or_create(&EvictionLabel {
            result: Eviction::PdbRefused,
        })
        .inc();
        let mut r = prometheus_client::registry::Registry::default();
        r.register("evictions", "help", f);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &r).unwrap();
        assert!(
            out.contains("evictions_total{result=\"pdb_refused\"} 1"),
            "{out}"
        );
    }
}
