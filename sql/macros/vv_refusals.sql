{#- Why a well-formed response record is refused or ignored, and the record as vv_response_rejects
    shows it: one definition for int_vv_response_status (every record) and vv_response_rejects
    (the refused ones, read from the few rows of raw_vv_unknown_uids and raw_vv_later_records,
    never from every response of the campaign). -#}

{#- A later record of a key (int_vv_later_records, as `later`): `duplicate` of its first record
    when the responses are the same, else `conflict`. -#}
{% macro vv_later_status(later) -%}
CASE WHEN {{ later }}.first.response_digest = {{ later }}.response_digest THEN 'duplicate'
     ELSE 'conflict' END
{%- endmacro %}

{% macro vv_unknown_uid_reason(uid) -%}
'unknown uid ''' || {{ uid }} || ''': not a question of vv_questions'
{%- endmacro %}

{#- The reason of a later record of `status` (duplicate or conflict), `first` its first record. -#}
{% macro vv_later_reason(status, first) -%}
CASE {{ status }}
    WHEN 'duplicate' THEN 'duplicate of ' || {{ first }}.source_file || ' v'
        || {{ first }}.file_version || ' line ' || {{ first }}.line || ' (same content): ignored'
    WHEN 'conflict' THEN 'conflicts with ' || {{ first }}.source_file || ' v'
        || {{ first }}.file_version || ' line ' || {{ first }}.line
        || ': same run_id/step/uid/sample_idx, different response (use another sample_idx)'
END
{%- endmacro %}

{#- The record as parsed, as JSON (vv_response_rejects.raw), from relation alias `r`. -#}
{% macro vv_response_raw(r) -%}
to_json(struct_pack(run_id := {{ r }}.run_id, step := {{ r }}.step, uid := {{ r }}.uid,
                    sample_idx := {{ r }}.sample_idx, response := {{ r }}.response))::VARCHAR
{%- endmacro %}
