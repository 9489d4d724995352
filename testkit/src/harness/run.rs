//! The imperative half of a call: invoking hooks and the target through the
//! engine and moving the call's record from state to state.

use iii_sdk::Error;
use serde_json::{json, Value};

use super::chain::{self, CallView, ChainKey, HookFailure, Verdict};
use super::config::{HookConfig, HookPoint};
use super::model::{BindingInfo, CallSpec, CallState, HookCall, TargetRun};
use super::{lock, peer, CallKey, CallRecord, Core};

pub(super) fn view(spec: &CallSpec) -> CallView<'_> {
    CallView {
        session_id: &spec.session_id,
        turn_id: &spec.turn_id,
        call_id: &spec.call_id,
        function_id: &spec.function_id,
        step: spec.step,
        depth: spec.depth,
        metadata: spec.metadata.as_ref(),
    }
}

/// Where a held call was parked, as a resume needs it.
#[derive(Debug, Clone)]
pub(super) enum Parked {
    Pre {
        holder: ChainKey,
    },
    /// Held at post-trigger by this binding.
    PostBy {
        holder: ChainKey,
    },
    Post,
}

impl Core {
    pub(super) async fn run_call(&self, spec: CallSpec) -> CallState {
        if self.today() {
            return self.run_call_today(spec).await;
        }
        let key: CallKey = (spec.session_id.clone(), spec.call_id.clone());
        lock(&self.calls).insert(key.clone(), CallRecord::new(spec));
        self.run_pre(&key, None, Vec::new()).await
    }

    /// Resumes a call a resolve claimed (see the module doc of `harness`).
    pub(super) async fn resume(
        &self,
        key: &CallKey,
        parked: Parked,
        extra_roots: Vec<String>,
    ) -> CallState {
        match parked {
            Parked::Pre { holder } => self.run_pre(key, Some(holder), extra_roots).await,
            Parked::PostBy { .. } | Parked::Post => {
                self.run_target_then_post(key, extra_roots).await
            }
        }
    }

    pub(super) fn snapshot(&self, key: &CallKey) -> Option<(CallSpec, Value)> {
        lock(&self.calls)
            .get(key)
            .map(|r| (r.spec.clone(), r.arguments.clone()))
    }

    async fn run_pre(
        &self,
        key: &CallKey,
        after: Option<ChainKey>,
        extra_roots: Vec<String>,
    ) -> CallState {
        let Some((spec, mut arguments)) = self.snapshot(key) else {
            return CallState::Running;
        };
        let point = HookPoint::PreTrigger;
        for (chain_key, binding, config) in
            self.bindings
                .hook_chain(point, &spec.function_id, after.as_ref())
        {
            let input = chain::hook_input(point, view(&spec), &arguments, None);
            match self.run_hook(&spec, point, &binding, &config, input).await {
                None | Some(Verdict::Continue(None)) => {}
                Some(Verdict::Continue(Some(rewritten))) => arguments = rewritten,
                Some(Verdict::Deny(reason)) => {
                    let result = chain::denied_result(&spec.call_id, &spec.function_id, &reason);
                    return self.settle(
                        key,
                        Some(arguments),
                        CallState::Denied {
                            reason,
                            point,
                            result,
                        },
                    );
                }
                Some(Verdict::Hold) => {
                    return self.park(key, arguments, point, chain_key, binding.function_id);
                }
            }
        }
        if let Some(record) = lock(&self.calls).get_mut(key) {
            record.arguments = arguments;
        }
        self.run_target_then_post(key, extra_roots).await
    }

    async fn run_target_then_post(&self, key: &CallKey, extra_roots: Vec<String>) -> CallState {
        let Some((spec, arguments)) = self.snapshot(key) else {
            return CallState::Running;
        };
        let policy_denied = lock(&self.policy_denied).contains(&spec.function_id);
        let result = if policy_denied {
            chain::policy_denied_result(&spec.call_id, &spec.function_id)
        } else {
            self.run_target(&spec, &arguments, extra_roots).await
        };
        self.run_post(key, &spec, &arguments, result).await
    }

    async fn run_target(
        &self,
        spec: &CallSpec,
        arguments: &Value,
        extra_roots: Vec<String>,
    ) -> Value {
        let mut metadata = json!({
            "session_id": spec.session_id,
            "turn_id": spec.turn_id,
            "function_call_id": spec.call_id,
            "granted_roots": self.roots(&spec.session_id),
            "extra_roots": extra_roots,
        });
        if let Some(dir) = spec.metadata.as_ref().and_then(|m| m.get("working_dir")) {
            metadata["working_dir"] = dir.clone();
        }
        let result = match self.invoke_target(spec, arguments, &metadata).await {
            Ok(output) => chain::success_result(&spec.call_id, &spec.function_id, &output),
            Err((code, message)) => {
                chain::error_result(&spec.call_id, &spec.function_id, &code, &message)
            }
        };
        lock(&self.journal).target_runs.push(TargetRun {
            function_id: spec.function_id.clone(),
            session_id: spec.session_id.clone(),
            turn_id: spec.turn_id.clone(),
            call_id: spec.call_id.clone(),
            arguments: arguments.clone(),
            metadata,
            extra_roots,
            boundary: None,
            result: result.clone(),
        });
        result
    }

    /// Invokes a call's target through the engine with the options' timeout;
    /// an error comes back as `(code, message)`, the message prefixed with
    /// the function id when the options say so.
    pub(super) async fn invoke_target(
        &self,
        spec: &CallSpec,
        arguments: &Value,
        metadata: &Value,
    ) -> Result<Value, (String, String)> {
        let request = peer::request(
            &spec.function_id,
            arguments.clone(),
            None,
            Some(self.options.target_timeout_ms),
            Some(metadata),
            None,
        );
        self.iii.trigger(request).await.map_err(|err| {
            let (code, message) = match err {
                Error::Remote { code, message, .. } => (code, message),
                Error::Timeout => ("timeout".to_string(), Error::Timeout.to_string()),
                other => ("invocation_failed".to_string(), other.to_string()),
            };
            let message = if self.options.prefix_target_errors {
                format!("{}: {message}", spec.function_id)
            } else {
                message
            };
            (code, message)
        })
    }

    async fn run_post(
        &self,
        key: &CallKey,
        spec: &CallSpec,
        arguments: &Value,
        result: Value,
    ) -> CallState {
        let point = HookPoint::PostTrigger;
        for (chain_key, binding, config) in self.bindings.hook_chain(point, &spec.function_id, None)
        {
            let input = chain::hook_input(point, view(spec), arguments, Some(&result));
            match self.run_hook(spec, point, &binding, &config, input).await {
                None | Some(Verdict::Continue(_)) => {}
                Some(Verdict::Deny(reason)) => {
                    let result = chain::denied_result(&spec.call_id, &spec.function_id, &reason);
                    return self.settle(
                        key,
                        None,
                        CallState::Denied {
                            reason,
                            point,
                            result,
                        },
                    );
                }
                Some(Verdict::Hold) => {
                    return self.park(
                        key,
                        arguments.clone(),
                        point,
                        chain_key,
                        binding.function_id,
                    );
                }
            }
        }
        self.settle(key, None, CallState::Completed { result })
    }

    /// Invokes one hook synchronously with the binding's timeout; `None` means
    /// skipped (a fail_open hook that failed).
    async fn run_hook(
        &self,
        spec: &CallSpec,
        point: HookPoint,
        binding: &BindingInfo,
        config: &HookConfig,
        input: Value,
    ) -> Option<Verdict> {
        let failure = match self.invoke_hook(spec, point, binding, config, input).await {
            Ok(value) => match chain::read_reply(&value) {
                Ok(verdict) => return Some(verdict),
                Err(why) => HookFailure::Failed(why),
            },
            Err(failure) => failure,
        };
        tracing::debug!(hook = %binding.function_id, ?failure, "hook failed");
        chain::failure_verdict(config.on_error, &binding.function_id, &failure)
    }

    /// The timeout one hook runs under: its binding's, cut to
    /// [`HarnessOptions::hook_timeout_ms`](super::HarnessOptions::hook_timeout_ms)
    /// when that is set.
    fn hook_timeout_ms(&self, config: &HookConfig) -> u64 {
        self.options
            .hook_timeout_ms
            .map_or(config.timeout_ms, |cut| cut.min(config.timeout_ms))
    }

    /// Invokes one hook and journals the call; the reply, or why there is
    /// none.
    pub(super) async fn invoke_hook(
        &self,
        spec: &CallSpec,
        point: HookPoint,
        binding: &BindingInfo,
        config: &HookConfig,
        input: Value,
    ) -> Result<Value, HookFailure> {
        let request = peer::request(
            &binding.function_id,
            input.clone(),
            None,
            Some(self.hook_timeout_ms(config)),
            binding.metadata.as_ref(),
            binding.namespace.as_deref(),
        );
        let reply = self.iii.trigger(request).await;
        let recorded = match &reply {
            Ok(v) => Ok(v.clone()),
            Err(Error::Timeout) => Err("timed out".to_string()),
            Err(e) => Err(peer::error_text(e)),
        };
        lock(&self.journal).hook_calls.push(HookCall {
            point,
            binding_id: binding.id.clone(),
            function_id: binding.function_id.clone(),
            session_id: spec.session_id.clone(),
            call_id: spec.call_id.clone(),
            input,
            reply: recorded,
        });
        reply.map_err(|e| match e {
            Error::Timeout => HookFailure::TimedOut,
            e => HookFailure::Failed(peer::error_text(&e)),
        })
    }

    pub(super) fn park(
        &self,
        key: &CallKey,
        arguments: Value,
        point: HookPoint,
        holder: ChainKey,
        held_by: String,
    ) -> CallState {
        let state = CallState::Held { held_by, point };
        if let Some(record) = lock(&self.calls).get_mut(key) {
            record.arguments = arguments;
            record.state = state.clone();
            record.holder = Some(holder);
        }
        state
    }

    pub(super) fn settle(
        &self,
        key: &CallKey,
        arguments: Option<Value>,
        state: CallState,
    ) -> CallState {
        if let Some(record) = lock(&self.calls).get_mut(key) {
            if let Some(arguments) = arguments {
                record.arguments = arguments;
            }
            record.state = state.clone();
            record.holder = None;
        }
        state
    }
}
