//! Why a workload spec was refused.

/// Why [`open`](crate::open) refused a spec. Every message names the workload
/// and, where it applies, the parameter, and says what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// The name before `:` is not a built-in workload.
    #[error("unknown workload `{name}`: the built-in workloads are {valid}")]
    UnknownWorkload {
        /// The name as written.
        name: String,
        /// The valid names, comma-separated.
        valid: String,
    },
    /// A key is not a parameter of this workload.
    #[error("workload `{workload}` has no parameter `{key}`: its parameters are {valid}")]
    UnknownKey {
        /// The workload.
        workload: String,
        /// The key as written.
        key: String,
        /// The workload's parameters, comma-separated.
        valid: String,
    },
    /// A value is not allowed for its parameter.
    #[error("workload `{workload}`: `{key}={value}` is not allowed: {allowed}")]
    BadValue {
        /// The workload.
        workload: String,
        /// The parameter.
        key: String,
        /// The value as written.
        value: String,
        /// What the parameter accepts.
        allowed: String,
    },
    /// The spec is not `NAME[:key=value,...]`.
    #[error("workload spec `{spec}`: {reason}; write NAME[:key=value,key=value...], e.g. stride:heap=8M,every=16")]
    Syntax {
        /// The spec as written.
        spec: String,
        /// What is wrong.
        reason: String,
    },
}
