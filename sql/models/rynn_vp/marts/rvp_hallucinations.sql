-- Every localized hallucination of an accepted record: entity, locus (an interval of the case or
-- a step id of the candidate), contradictory observations, affected chain.
SELECT system, case_id, evaluation_id, judge_run_id, attempt, is_final, hallucination_no,
       entity, locus, locus_kind, contradictory_observations, affected_chain, severity
FROM {{ ref('stg_rvp_hallucinations') }}
