//! The harness's hook protocol, shared by the two hooks (the gate and the
//! grant watch): the input and output shapes ([`protocol`]), the time a hook
//! may spend ([`budget`]), what a hold writes ([`record`]) and which session
//! spawned which ([`lineage`]). Neither hook imports the other; both stand on
//! this module.

pub(crate) mod budget;
pub(crate) mod protocol;
pub(crate) mod record;

pub(crate) use protocol::deny;
pub use protocol::{parse_hook_input, HookCall, HookInput, HookOutput, MalformedInput};
