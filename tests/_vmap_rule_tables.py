"""The justification tables of ``test_vmap_rules.py``'s coverage tests: the primitives that
have no batching rule (and why that is right), and the primitives whose batching rule other
test files exercise (and where). Kept apart so the test file stays a list of checks."""

# Primitives that have no batching rule, and why that is right.
NO_RULE = {
    # Unreduced/reduced manual axes: JAX 0.10.2's batchers raise NotImplementedError too.
    **{name: "JAX 0.10.2 has none (its rule raises NotImplementedError)" for name in (
        "vary_unreduced_cast_p", "reduced_vary_cast_p", "preduced", "unreduced_psum",
        "unreduced_reduce_scatter", "all_gather_reduced")},
    # Nothing to batch: no array operands (vmap never sees them batched).
    "iota": "no operands",
    "iota_2x32_shape": "no operands",
    "empty": "no operands",
    "platform_index": "no operands",
    "create_token": "no operands",
    "after_all": "its operands are tokens, which vmap never maps (they carry no data)",
    # JAX defines no batching rule for XLA's stateful generator either: a batch of draws is
    # one draw of the batched shape, which vmap of a bound scalar range cannot express.
    "rng_uniform": "stateful; JAX has no batching rule for it",
    # JAX batches only the add form (select_and_scatter_add), which all of its uses bind.
    "select_and_scatter": "JAX has no batching rule for the general form",
    # JAX has none either; test_export.py and test_linear_call.py check that vmap raises.
    "call_exported": "JAX has no batching rule (vmap of Exported.call raises, as in JAX)",
    "eval_jaxpr": "bound only while lowering scan bodies (func.call @closed_call), after every "
                  "transformation ran; the scan primitive has the batching rule",
    "linear_call": "JAX has no batching rule (test_linear_call.py: both raise)",
    "custom_partitioning": "JAX has no batching rule (test_custom_partitioning.py: both raise)",
    # Made by test_extend.py to show a user-defined primitive (extend.core.Primitive); it is
    # registered when that file runs in the same process, and is not jaxkit's.
    "fma": "a user primitive defined by test_extend.py, with no batching rule on purpose",
    "roofline_test_user_op": "a user primitive defined by test_roofline.py (no rules but a "
                             "lowering, on purpose)",
    # Only between a VJPHiPrimitive's JVP and its transpose; JAX's rule raises as well.
    "call_hi_primitive_linearized": "JAX's batching rule for it only raises",
}

# Primitives with a batching rule exercised by other test files (named here).
EXERCISED_ELSEWHERE = {
    "add_any": "summing tangents; vmap of grad in test_vmap.py",
    # custom_lin only exists between linearization and transposition, so a BatchTrace sees it
    # only in forward mode, where a custom_vjp function raises anyway (as in JAX).
    "custom_lin": "test_custom_derivatives.py (vmap and grad of custom_vjp functions)",
    "debug_callback": "test_callbacks.py (debug.callback under vmap)",
    "debug_print": "test_callbacks.py (debug.print under vmap)",
    "pure_callback": "test_callbacks.py (every vmap_method, compared with JAX)",
    "io_callback": "test_jax_parity.py (io_callback under vmap, and ordered=True refused, vs JAX)",
    "custom_vmap_call": "test_jax_parity.py (custom_vmap rules under vmap, compared with JAX)",
    "custom_linear_solve": "test_lax_linear_solve.py (batched b, batched matrix, both, against "
                           "a loop; vmap of grad and grad of vmap)",
    "custom_root": "test_lax_linear_solve.py (scalar and vector roots against a loop)",
    "check": "test_ecosystem.py (checkify under vmap names the failing mapped index)",
    "composite": "test_lax_composite.py (vmap of a composite against the unbatched calls)",
    "rng_bit_generator": "test_lax_staging.py (JAX's rule: the first key draws the batch)",
    "ragged_all_to_all": "test_lax_collectives_p2p.py (over the vmapped axis name and a plain "
                         "vmap of it inside pmap, against NumPy)",
    "psend": "test_lax_collectives_p2p.py (plain vmap keeps one send; over its axis it raises)",
    "precv": "test_lax_collectives_p2p.py (vmap over its axis raises, as it needs devices)",
    "shard_map": "test_sharding.py (vmap of a shard_map with a psum, against a loop)",
    "pvary": "test_shard_map_vma.py (vmap of a check_vma shard_map that pvary-s and psums)",
    "psum_invariant": "test_shard_map_vma.py (vmap of a check_vma shard_map that pvary-s and "
                      "psums)",
    "sharding_constraint": "test_sharding.py (with_sharding_constraint under vmap)",
    "reshard": "test_explicit_sharding.py (vmap of reshard, the batch keeping its split, vs JAX)",
    "my_call": "test_extend.py (a user CallPrimitive under vmap)",
    "call": "test_extend.py (call_p under vmap and vmap of grad, against JAX)",
    "closed_call": "test_extend.py (closed_call_p under vmap, against JAX)",
    "ffi_call": "test_ffi.py (a C++ handler under vmap with every vmap_method)",
    "inspect_sharding": "test_sharding_axes.py (inspect_array_sharding under vmap, vs JAX)",
    "shard_alike": "test_sharding_axes.py (shard_alike under vmap, vs JAX)",
    "layout_constraint": "test_layout_api.py (with_layout_constraint under vmap, vs JAX)",
    "host_local_array_to_global_array": "test_multihost.py (vmap jaxprs against JAX)",
    "global_array_to_host_local_array": "test_multihost.py (vmap jaxprs against JAX)",
    "spsolve": "test_sparse.py (batched against a loop)",
    "xla_metadata_call": "test_scheduling_fused.py (vmap and vmap of grad, against JAX)",
    "fused_call": "test_scheduling_fused.py (vmap jaxprs against JAX; it runs on CUDA only)",
    "compute_on": "test_compute_on.py (vmap of compute_on2: jaxpr and values, against JAX)",
    "remat_opt": "test_names37.py (vmap of grad and of vjp of an optimize_remat custom_vjp, vs JAX)",
    "call_hi_primitive": "test_hijax.py (vmap through batch_dim_rule, grad of vmap, vs JAX)",
}
EXERCISED_ELSEWHERE.update({p: "test_ecosystem_fixes_edtypes.py (vmap of a conversion to and "
                               "from a user-defined extended dtype, against JAX)"
                            for p in ("to_edtype", "from_edtype")})
EXERCISED_ELSEWHERE["all_gather_invariant"] = (
    "test_shard_map_unreduced.py (vmap inside a shard_map body, against JAX)")
EXERCISED_ELSEWHERE.update({p: "test_ref.py (vmap over refs and of functions making refs)"
                            for p in ("get", "swap", "addupdate", "new_ref", "freeze")})
EXERCISED_ELSEWHERE.update({p: "test_sparse.py (vmap over sparse arrays, against JAX/a loop)"
                            for p in ("bcoo_dot_general", "bcoo_dot_general_sampled",
                                      "bcoo_extract", "bcoo_fromdense", "bcoo_sort_indices",
                                      "bcoo_spdot_general", "bcoo_sum_duplicates",
                                      "bcoo_todense", "bcoo_transpose", "bcsr_dot_general",
                                      "bcsr_extract", "bcsr_fromdense", "bcsr_todense",
                                      "coo_fromdense", "coo_matmat", "coo_matvec",
                                      "coo_todense", "csr_fromdense", "csr_matmat",
                                      "csr_matvec", "csr_todense")})
EXERCISED_ELSEWHERE.update({p: "test_sparse_api.py (vmap of todense and the raw COO products, "
                               "against JAX/NumPy)" for p in ("todense", "coo_spmv", "coo_spmm")})
NO_RULE["program_id"] = ("no operands (a Pallas kernel's grid index); vmap of a pallas_call adds "
                         "a grid axis instead of batching the kernel")
NO_RULE["multiple_of"] = "JAX 0.10.2 has none (test_pallas.py checks vmap raises as JAX's)"
EXERCISED_ELSEWHERE["pallas_call"] = "test_pallas.py (vmap of kernels, against JAX)"
NO_RULE.update({p: "cuDNN's fused LSTM kernel (jax.experimental.rnn.lstm): its abstract "
                   "evaluation already raises off a GPU, and JAX 0.10.2 has no batching rule "
                   "either" for p in ("rnn_fwd", "rnn_bwd")})
NO_RULE["empty2"] = ("no operands (a scalar for scan's output buffers), so nothing is ever "
                     "batched; JAX 0.10.2 has no batching rule either")
EXERCISED_ELSEWHERE["fusible"] = ("test_pallas_fuser.py (a batch of one, against JAX; larger "
                                  "batches raise NotImplementedError as JAX's rule does)")
NO_RULE["custom_fusion"] = "JAX 0.10.2 has none (a fusion's rules are block-spec rules)"
NO_RULE.update({p: "a TPU/GPU-only kernel primitive: JAX 0.10.2 has no batching rule (nor a "
                   "CPU lowering; test_pallas_extras.py checks its errors against JAX)"
                for p in ("prng_seed", "prng_random_bits", "stochastic_round",
                          "debug_barrier_p", "elementwise_inline_asm_p")})
NO_RULE.update({p: "JAX 0.10.2 has none (Pallas TPU kernel operation; test_pallas_pipeline.py "
                   "checks vmap raises as JAX's)"
                for p in ("roll", "trace_value", "pack_elementwise", "unpack_elementwise",
                          "matmul_push_rhs", "matmul_acc_lhs", "matmul_pop",
                          "with_memory_space_constraint", "broadcast_to")})
EXERCISED_ELSEWHERE.update({p: "test_pallas_pipeline.py (vmap against JAX)"
                            for p in ("bitcast", "add_dependency")})
