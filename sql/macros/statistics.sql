{#- Error bars and tests, in plain SQL so the catalog keeps working in any duckdb CLI (DuckDB has
    no t or binomial distribution; scipy computes the quantile table and checks every macro in
    tests/warehouse/test_statistics.py). Scalar macros are expressions without correlated
    subqueries (finite sums are list_sum over list_transform), so a view that uses them on many
    rows stays one plan. -#}

{#- Clustered standard error of a mean: Miller (2024), "Adding Error Bars to Evals", eq. 4, as
    lmms-eval 0.7.3's clustered_stderr computes it:
        SE^2 = s^2/n + (1/n^2) sum_c sum_{i != j in c} (x_i - mean)(x_j - mean)
    with s^2 the sample variance (ddof 1). The cross term of a cluster is (sum_c d)^2 - sum_c d^2
    with d = x - mean, so sums per cluster are enough: no row is held, whatever the input size.
    Three steps, usable separately where a view aggregates more in the same passes:
      cluster_sums(x[, m]) per (keys, cluster): m_n, m_s, m_q (count, sum, sum of squares of
                          the expression x, named m; m defaults to x, a column)
      clustered_totals(m) per keys, over those: the totals, and m_clusters (clusters with a value)
      clustered_se(m)     from the totals: m_se, NULL below 2 clusters (a single cluster has no
                          between-cluster variance to estimate: its eq. 4 value is no SE);
                          singleton clusters give the CLT form s/sqrt(n). The t interval has
                          m_clusters - 1 degrees of freedom.
    clustered_stats(relation, keys, cluster, measures) chains them: keys, then m_n, m_mean, m_se,
    m_clusters per measure (NULLs ignored). Arguments of these macros are SQL text: pass
    qualified column names (a bare `df` or `t` could bind to a macro's own subquery). -#}

{#- The same bits whatever the row order: DuckDB sums floats in the order it reads the rows,
    which an incremental table and a rebuild, or two runs of its threads, do not share. So
    every sum and mean of fractional values here, and in the views over millions of rows, is
    `exact_sum` / `exact_mean`; every other float sum, mean and correlation in the models
    (over a few rows a group) orders its input
    (`sum(x ORDER BY x)`, `avg(x ORDER BY x)`, `corr(a, b ORDER BY a, b)`). Sums of counts stay
    plain (exact in any order). -#}

{#- The sum of a DOUBLE expression in any order: each value is rounded once to 18 decimals
    (a DECIMAL(38, 18), a 128-bit integer underneath) and those are added exactly, so the
    order the rows come in cannot change a bit. For values of 1e-6 and up (scores of 0-1 or
    0-100, their squares and cluster sums), up to ~1e19 in all: a larger sum is an overflow
    error, never a wrong number. Cheaper than ordering, which holds and sorts each group: on
    4.4 M flips (vv_flip_groups) 0.35 s of query where `sum(x ORDER BY x)` took 1.0 s and a
    plain sum 0.25 s; int_vv_checkpoint_scores over 11.3 M responses 2.2-2.4 s against
    3.8-4.1 s, int_vv_checkpoint_breakdowns 5.0-5.4 s against 7.0-7.4 s (and its means too
    3.4-3.6 s against 4.8-5.7 s). -#}
{% macro exact_sum(x) -%}
CAST(sum(CAST({{ x }} AS DECIMAL(38, 18))) AS DOUBLE)
{%- endmacro %}

{#- The mean of the non-NULL values of `x` from `exact_sum`: NULL when there are none. -#}
{% macro exact_mean(x) -%}
({{ exact_sum(x) }} / count({{ x }}))
{%- endmacro %}

{#- Undefined is NULL: an expression's value where it is a finite number, else NULL. NaN (0/0, a
    correlation of one pair or of no variance, sqrt of a negative) and +-Infinity (x/0, ln 0)
    are no numbers a reader can use: JSON cannot hold them, DuckDB orders NaN above every number
    (so greatest/least and range tests go wrong) and a NaN df would not cast. Every statistic a
    view shows goes through this (DuckDB evaluates the repeated expression once). -#}
{% macro finite_or_null(x) -%}
(CASE WHEN isfinite({{ x }}) THEN {{ x }} END)
{%- endmacro %}

{% macro cluster_sums(value, name=none) -%}
{%- set m = name or value -%}
count({{ value }}) AS {{ m }}_n, {{ exact_sum(value) }} AS {{ m }}_s,
{{ exact_sum('(' ~ value ~ ') * (' ~ value ~ ')') }} AS {{ m }}_q
{%- endmacro %}


{% macro clustered_totals(m) -%}
CAST(sum({{ m }}_n) AS DOUBLE) AS {{ m }}_n, {{ exact_sum(m ~ '_s') }} AS {{ m }}_s,
{{ exact_sum(m ~ '_q') }} AS {{ m }}_q,
{{ exact_sum(m ~ '_s * ' ~ m ~ '_s') }} AS {{ m }}_ss,
{{ exact_sum(m ~ '_n * ' ~ m ~ '_s') }} AS {{ m }}_ns,
sum(CAST({{ m }}_n AS DOUBLE) ^ 2) AS {{ m }}_nn,
count(*) FILTER (WHERE {{ m }}_n > 0) AS {{ m }}_clusters
{%- endmacro %}

{% macro clustered_se(m) -%}
{%- set mean = '(' ~ m ~ '_s / ' ~ m ~ '_n)' -%}
{%- set ss = '(' ~ m ~ '_q - ' ~ m ~ '_s * ' ~ mean ~ ')' -%}
{%- set se -%}
sqrt(greatest(0.0,
    {{ ss }} / (({{ m }}_n - 1) * {{ m }}_n)
    + ({{ m }}_ss - 2 * {{ mean }} * {{ m }}_ns + {{ mean }} ^ 2 * {{ m }}_nn - {{ ss }})
      / ({{ m }}_n * {{ m }}_n)))
{%- endset -%}
CASE WHEN {{ m }}_clusters >= 2 THEN {{ finite_or_null(se) }} END
{%- endmacro %}

{% macro clustered_stats(relation, keys, cluster, measures) -%}
{%- set by = keys | join(', ') -%}
(WITH per_cluster AS (
    SELECT {{ by }}, {{ cluster }} AS cluster_id
    {%- for m in measures %}, {{ cluster_sums(m) }}{% endfor %}
    FROM {{ relation }} GROUP BY ALL
),
totals AS (
    SELECT {{ by }}
    {%- for m in measures %}, {{ clustered_totals(m) }}{% endfor %}
    FROM per_cluster GROUP BY ALL
)
SELECT {{ by }}
{%- for m in measures %},
       CAST({{ m }}_n AS BIGINT) AS {{ m }}_n,
       {{ finite_or_null(m ~ '_s / ' ~ m ~ '_n') }} AS {{ m }}_mean,
       {{ clustered_se(m) }} AS {{ m }}_se, {{ m }}_clusters
{%- endfor %}
FROM totals)
{%- endmacro %}

{#- t(0.975, df): scipy's value from stat_t_quantiles up to df 1000, above it the
    Cornish-Fisher expansion (Abramowitz & Stegun 26.7.5, four terms; within 1e-15 of scipy
    there). NULL below 1 (and for a NaN or infinite df). -#}
{% macro t975(df) -%}
(CASE WHEN isfinite({{ df }}) AND ({{ df }}) >= 1 THEN coalesce(
    (SELECT list(stat_tq.t975 ORDER BY stat_tq.df)
     FROM {{ ref('stat_t_quantiles') }} AS stat_tq)[CAST({{ df }} AS BIGINT)],
    {{ _t975_expansion(df) }}) END)
{%- endmacro %}

{% macro _t975_expansion(df) -%}
{#- z + g1/df + g2/df^2 + g3/df^3 + g4/df^4 with z = Phi^-1(0.975) and A&S's g_i(z), as doubles
    (scientific notation, so DuckDB reads them as DOUBLE, not DECIMAL) -#}
(1.959963984540054e0 + 2.372271230298562e0 / ({{ df }}) + 2.8224986157396112e0 / ({{ df }})^2
 + 2.555849679507722e0 / ({{ df }})^3 + 1.5895340533938225e0 / ({{ df }})^4)
{%- endmacro %}

{#- The 95 % interval of a mean: mean -/+ t(0.975, df) * se, clipped to [low, high]; the point
    itself when se is 0; NULL without a finite mean, se or bound, or a df of at least 1. Two
    columns, <name>_ci_low and <name>_ci_high. -#}
{% macro interval(name, mean, se, df, low, high) -%}
CASE WHEN ({{ se }}) = 0 THEN {{ finite_or_null(mean) }}
     WHEN isfinite(({{ mean }}) - {{ t975(df) }} * ({{ se }}))
     THEN greatest({{ low }}, ({{ mean }}) - {{ t975(df) }} * ({{ se }})) END AS {{ name }}_ci_low,
CASE WHEN ({{ se }}) = 0 THEN {{ finite_or_null(mean) }}
     WHEN isfinite(({{ mean }}) + {{ t975(df) }} * ({{ se }}))
     THEN least({{ high }}, ({{ mean }}) + {{ t975(df) }} * ({{ se }})) END AS {{ name }}_ci_high
{%- endmacro %}

{#- Two-sided p of a t statistic with integer df >= 1, exact: P(|T| < t) has a finite closed form
    in theta = atan(|t| / sqrt(df)) (Abramowitz & Stegun 26.7.3-4):
      df even: sin(theta) * sum_{k < df/2} (2k-1)!!/(2k)!! cos^2k(theta)
      df odd:  (2/pi) (theta + sin(theta) cos(theta)
                       * sum_{k < (df-1)/2} (2k)!!/(2k+1)!! cos^2k(theta))
    and p = 1 - that. The coefficients come from lgamma; a t of +-infinity (a zero standard
    error with a non-zero mean) gives 0; a NULL or NaN t, or a df below 1 (or not finite),
    NULL. -#}
{% macro t_two_sided_p(t, df) -%}
{%- set c2 = '((' ~ df ~ ') / ((' ~ df ~ ') + (' ~ t ~ ')^2))' -%}
{%- set sin_t = '(abs(' ~ t ~ ') / sqrt((' ~ df ~ ') + (' ~ t ~ ')^2))' -%}
{%- set terms = 'range(CAST((' ~ df ~ ') // 2 AS BIGINT))' -%}
(CASE WHEN isfinite({{ df }}) AND ({{ df }}) >= 1 AND NOT isnan({{ t }}) THEN
  CASE WHEN isinf({{ t }}) THEN 0.0 ELSE
  greatest(0.0, least(1.0, 1.0 - CASE WHEN ({{ df }}) % 2 = 0
       THEN {{ sin_t }} * list_sum(list_transform({{ terms }}, lambda stat_k:
                exp(lgamma(2 * stat_k + 1) - 2 * stat_k * ln(2) - 2 * lgamma(stat_k + 1))
                * pow({{ c2 }}, stat_k)))
       ELSE 2 / pi() * (atan(abs({{ t }}) / sqrt({{ df }}))
            + {{ sin_t }} * sqrt({{ c2 }}) * coalesce(list_sum(list_transform({{ terms }},
                lambda stat_k: exp(2 * stat_k * ln(2) + 2 * lgamma(stat_k + 1)
                                   - lgamma(2 * stat_k + 2)) * pow({{ c2 }}, stat_k))), 0.0))
       END))
  END END)
{%- endmacro %}

{#- Exact two-sided binomial test of k successes in n trials against p = 1/2 (McNemar's exact test
    on the discordant pairs): min(1, 2 P(X <= min(k, n - k))); 1 when n is 0. -#}
{% macro binom_half_two_sided_p(k, n) -%}
(CASE WHEN ({{ n }}) = 0 THEN 1.0 ELSE
  least(1.0, 2 * list_sum(list_transform(
      range(CAST(least({{ k }}, ({{ n }}) - ({{ k }})) AS BIGINT) + 1),
      lambda stat_i: exp(lgamma(({{ n }}) + 1) - lgamma(stat_i + 1)
                         - lgamma(({{ n }}) - stat_i + 1) - ({{ n }}) * ln(2)))))
 END)
{%- endmacro %}

{#- Resampling with replacement that any engine can replay: draw `draw` of n items is the list of
    1-based indices lowbias32(draw * 2^20 + j + seed) mod n + 1, j = 0..n-1 (lowbias32: Chris
    Wellons' integer hash, on 32 bits). The same (seed, draw, n) always gives the same indices, so
    exports stay byte-identical. n must stay below 2^20. -#}
{% macro bootstrap_indices(draw, n, seed) -%}
list_transform(list_transform(list_transform(list_transform(range({{ n }}),
    lambda j: CAST((({{ draw }}) * 1048576 + j + {{ seed }}) % 4294967296 AS UBIGINT)),
    lambda x: (xor(x, x >> 16) * CAST(2146121005 AS UBIGINT)) % CAST(4294967296 AS UBIGINT)),
    lambda x: (xor(x, x >> 15) * CAST(2221713035 AS UBIGINT)) % CAST(4294967296 AS UBIGINT)),
    lambda x: CAST(xor(x, x >> 16) % ({{ n }}) AS BIGINT) + 1)
{%- endmacro %}

{#- lmms-eval 0.7.3's figures for repeated samples (lmms_eval/api/metrics.py), as aggregates over
    question rows that hold each question's samples `n` and correct samples `c` (0/1 scores: the
    counts are all these functions use). One row per question with n >= 1:
      expected_accuracy  the mean of every sample's score: sum c / sum n (a question weighs by
                         its samples, unlike the mean of per-question rates)
      consistency_rate   the share of questions whose samples all score the same (all right or
                         all wrong; one sample always is)
      internal_variance  the mean over questions with n >= 2 of the samples' variance (ddof 1),
                         c (n - c) / (n (n - 1)) for 0/1 scores; NULL without such a question
                         (lmms-eval: NaN) -#}
{% macro expected_accuracy(c, n) -%}
{{ finite_or_null('sum(' ~ c ~ ') / sum(' ~ n ~ ')') }}
{%- endmacro %}

{% macro consistency_rate(c, n) -%}
avg(CASE WHEN ({{ c }}) = 0 OR ({{ c }}) = ({{ n }}) THEN 1.0 ELSE 0.0 END)
{%- endmacro %}

{% macro internal_variance(c, n) -%}
{%- set v -%}
CASE WHEN ({{ n }}) >= 2
     THEN ({{ c }}) * (({{ n }}) - ({{ c }})) / (({{ n }}) * (({{ n }}) - 1)) END
{%- endset -%}
{{ exact_mean(v) }}
{%- endmacro %}

{#- Power of a paired comparison, as lmms-eval 0.7.3's power_analysis (Miller 2024, section 5)
    computes it, for alpha = 0.05 two-sided and 80 % power, with normal quantiles from the seed
    stat_normal_quantiles (scipy's doubles):
      power_z()                        z(0.975) + z(0.8) = 2.8016 (alpha_z + beta_z, in that order)
      mde(se)                          the smallest difference detectable: power_z * se, with se
                                       the standard error of the mean difference
      questions_needed(diff, sd)       ceil(((alpha_z + beta_z) / (diff / sd))^2): the questions a
                                       difference `diff` needs when a question's paired difference
                                       has standard deviation sd (lmms-eval's min_n); NULL when
                                       sd or diff is not positive -#}
{% macro power_z() -%}
((SELECT stat_nq.z FROM {{ ref('stat_normal_quantiles') }} AS stat_nq WHERE stat_nq.p = 0.975)
 + (SELECT stat_nq.z FROM {{ ref('stat_normal_quantiles') }} AS stat_nq WHERE stat_nq.p = 0.8))
{%- endmacro %}

{% macro mde(se) -%}
{{ finite_or_null(power_z() ~ ' * (' ~ se ~ ')') }}
{%- endmacro %}

{% macro questions_needed(diff, sd) -%}
(CASE WHEN ({{ sd }}) > 0 AND ({{ diff }}) > 0
      THEN CAST(ceil(({{ power_z() }} / (({{ diff }}) / ({{ sd }}))) ^ 2) AS BIGINT) END)
{%- endmacro %}
