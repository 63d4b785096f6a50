-- One packet per (system, case, role) (system null: the per-case GT compilation packet): where
-- it is, its fingerprint, how many evidence files it names, the prompt version and GT cache ref.
SELECT system, case_id, evaluation_id, role, packet_path, packet_abspath,
       packet_fingerprint, n_evidence,
       prompt_version, prompt_source, gt_fingerprint, gt_cached
FROM {{ ref('stg_rvp_judge_packets') }}
