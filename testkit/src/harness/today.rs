//! Today's harness (generation 2): one call's way through the harness, and
//! the `execute` of a held call.
//!
//! A call: the trusted stamp (see [`super::scope`]) → the pre-trigger chain
//! (`mutations.arguments` rewrite; `deny` answers `hook_denied`; `hold`
//! parks the call with the arguments as rewritten so far, the holder's own
//! rewrite included) → the stamp again, so no hook can widen it → the target,
//! or the dispatch policy's refusal → the post-trigger chain (`mutations`
//! rewrite the result; a `deny` is not valid there and is ignored; `hold`
//! parks the call again) → the result.
//!
//! An `execute`: the stamp again with the durable grants and the resolve's
//! one-shot `fs_scope.grants` → the pre-trigger hooks that come after the
//! holder in the chain as it stands now (found by the holder's function id;
//! none when the holder is no longer bound, or when it held at post-trigger)
//! → the rest as above. Its result is appended to the turn under
//! `e_<turn_id>_<function_call_id>`.
//!
//! Subscription controls (and, when asked, `harness::spawn`) are settled by
//! the harness itself where the target would run ([`super::mediate`]).

use serde_json::{json, Value};

use super::chain::{self, Mutations, Reply};
use super::config::{HookConfig, HookPoint};
use super::mediate::Mediated;
use super::model::{BindingInfo, CallSpec, CallState, Entry, TargetRun};
use super::run::view;
use super::scope::{self, Boundary};
use super::{lock, CallKey, CallRecord, Core};

/// Where a pass through the pipeline starts.
enum Resume {
    /// A fresh call: the whole pre-trigger chain.
    Fresh,
    /// A released call: the pre-trigger hooks after this holder.
    After(String),
}

impl Core {
    pub(super) async fn run_call_today(&self, spec: CallSpec) -> CallState {
        let key: CallKey = (spec.session_id.clone(), spec.call_id.clone());
        self.note_turn(&spec.session_id, &spec.turn_id);
        lock(&self.calls).insert(key.clone(), CallRecord::new(spec.clone()));
        let grants = self.roots(&spec.session_id);
        let arguments = self.stamp(&key, &spec, spec.arguments.clone(), &grants);
        self.pipeline(&key, &spec, arguments, Resume::Fresh, &grants, &[])
            .await
    }

    /// Runs a claimed held call on (see the module doc).
    pub(super) async fn execute_today(
        &self,
        key: &CallKey,
        holder: String,
        one_shot: Vec<String>,
    ) -> CallState {
        let Some((spec, arguments)) = self.snapshot(key) else {
            return CallState::Running;
        };
        let grants = scope::union(&self.roots(&spec.session_id), &one_shot);
        let arguments = self.stamp(key, &spec, arguments, &grants);
        self.pipeline(
            key,
            &spec,
            arguments,
            Resume::After(holder),
            &grants,
            &one_shot,
        )
        .await
    }

    /// The boundary calls of `function_id` get right now.
    fn boundary_for(&self, function_id: &str) -> Boundary {
        let watch = self
            .bindings
            .post_hook_matches(scope::WATCH_ID, function_id);
        self.options.filesystem_boundary.resolve(watch)
    }

    /// Stamps the call's arguments and remembers the boundary it got.
    fn stamp(&self, key: &CallKey, spec: &CallSpec, arguments: Value, grants: &[String]) -> Value {
        let root = scope::turn_root(spec.metadata.as_ref());
        let boundary = self.boundary_for(&spec.function_id);
        if root.is_some() && scope::is_stamped(&spec.function_id) && arguments.is_object() {
            if let Some(record) = lock(&self.calls).get_mut(key) {
                record.boundary = Some(boundary);
            }
        }
        scope::stamp(&spec.function_id, arguments, root, grants, boundary)
    }

    async fn pipeline(
        &self,
        key: &CallKey,
        spec: &CallSpec,
        mut arguments: Value,
        resume: Resume,
        grants: &[String],
        one_shot: &[String],
    ) -> CallState {
        let point = HookPoint::PreTrigger;
        let mut hooks = self.bindings.hook_chain(point, &spec.function_id, None);
        let released = match &resume {
            Resume::Fresh => false,
            Resume::After(holder) => {
                hooks = match hooks.iter().position(|(k, _, _)| &k.function_id == holder) {
                    Some(i) => hooks.split_off(i + 1),
                    None => Vec::new(),
                };
                true
            }
        };
        for (chain_key, binding, config) in hooks {
            let input = chain::hook_input(point, view(spec), &arguments, None);
            match self
                .run_hook_today(spec, point, &binding, &config, input)
                .await
            {
                Reply::Continue(m) => {
                    self.annotate(key, &m);
                    if let Some(rewritten) = m.arguments {
                        arguments = rewritten;
                    }
                }
                Reply::Deny(reason) => {
                    let result =
                        chain::hook_denied_result(&spec.call_id, &spec.function_id, &reason);
                    let state = self.settle(
                        key,
                        Some(arguments),
                        CallState::Denied {
                            reason,
                            point,
                            result,
                        },
                    );
                    if released {
                        self.append(spec, &state);
                    }
                    return state;
                }
                Reply::Hold(m) => {
                    self.annotate(key, &m);
                    if let Some(rewritten) = m.arguments {
                        arguments = rewritten;
                    }
                    return self.park(key, arguments, point, chain_key, binding.function_id);
                }
            }
        }
        let arguments = self.stamp(key, spec, arguments, grants);
        if let Some(record) = lock(&self.calls).get_mut(key) {
            record.arguments = arguments.clone();
        }
        let refused = lock(&self.policy_denied).contains(&spec.function_id);
        let result = if refused {
            chain::policy_refusal_result(&spec.call_id, &spec.function_id)
        } else {
            match self.mediate(key, spec, &arguments).await {
                Some(Mediated::Result(result)) => result,
                Some(Mediated::Parked(state)) => return state,
                None => self.run_target_today(spec, &arguments, one_shot).await,
            }
        };
        self.post_today(key, spec, &arguments, result, released)
            .await
    }

    async fn post_today(
        &self,
        key: &CallKey,
        spec: &CallSpec,
        arguments: &Value,
        mut result: Value,
        released: bool,
    ) -> CallState {
        let point = HookPoint::PostTrigger;
        for (chain_key, binding, config) in self.bindings.hook_chain(point, &spec.function_id, None)
        {
            let input = chain::hook_input(point, view(spec), arguments, Some(&result));
            match self
                .run_hook_today(spec, point, &binding, &config, input)
                .await
            {
                Reply::Continue(m) => {
                    self.annotate(key, &m);
                    chain::rewrite_result(&mut result, &m);
                }
                // Not a post-trigger decision: the harness goes on.
                Reply::Deny(_) => {}
                Reply::Hold(m) => {
                    self.annotate(key, &m);
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
        let state = self.settle(key, None, CallState::Completed { result });
        if released {
            self.append(spec, &state);
        }
        state
    }

    async fn run_target_today(
        &self,
        spec: &CallSpec,
        arguments: &Value,
        one_shot: &[String],
    ) -> Value {
        let metadata = json!({
            "session_id": spec.session_id,
            "turn_id": spec.turn_id,
            "function_call_id": spec.call_id,
            "generation": 2,
        });
        let result = match self.invoke_target(spec, arguments, &metadata).await {
            Ok(output) => chain::output_result(&spec.call_id, &spec.function_id, &output),
            Err((code, message)) => {
                chain::error_result(&spec.call_id, &spec.function_id, &code, &message)
            }
        };
        let boundary = arguments
            .get("fs_scope")
            .and_then(|s| s.get("boundary"))
            .and_then(Value::as_str)
            .map(str::to_string);
        lock(&self.journal).target_runs.push(TargetRun {
            function_id: spec.function_id.clone(),
            session_id: spec.session_id.clone(),
            turn_id: spec.turn_id.clone(),
            call_id: spec.call_id.clone(),
            arguments: arguments.clone(),
            metadata,
            extra_roots: one_shot.to_vec(),
            boundary,
            result: result.clone(),
        });
        result
    }

    async fn run_hook_today(
        &self,
        spec: &CallSpec,
        point: HookPoint,
        binding: &BindingInfo,
        config: &HookConfig,
        input: Value,
    ) -> Reply {
        match self.invoke_hook(spec, point, binding, config, input).await {
            Ok(reply) => chain::read_reply_today(&reply),
            Err(failure) => {
                tracing::debug!(hook = %binding.function_id, ?failure, "hook failed");
                chain::failure_reply(config.on_error, &binding.function_id, &failure)
            }
        }
    }

    fn annotate(&self, key: &CallKey, mutations: &Mutations) {
        if mutations.annotations.is_empty() {
            return;
        }
        if let Some(record) = lock(&self.calls).get_mut(key) {
            for (k, v) in &mutations.annotations {
                record.annotations.insert(k.clone(), v.clone());
            }
        }
    }

    /// Appends a released call's result to its turn, once per entry id.
    fn append(&self, spec: &CallSpec, state: &CallState) {
        let Some(result) = state.result() else {
            return;
        };
        let entry_id = chain::entry_id(&spec.turn_id, &spec.call_id);
        let mut journal = lock(&self.journal);
        if !journal.entries.iter().any(|e| e.entry_id == entry_id) {
            journal.entries.push(Entry {
                entry_id,
                session_id: spec.session_id.clone(),
                turn_id: spec.turn_id.clone(),
                function_call_id: spec.call_id.clone(),
                result: result.clone(),
            });
        }
    }
}
