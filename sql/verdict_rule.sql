-- view: verdict_rule
-- purpose: The one verdict rule: what a comparison of two latencies may conclude, given the noise basis its interval rests on, where that interval lies, and how large the change is.
-- grain: one row per (basis, placement, effect): a lookup table the comparing views (speedups, series_steps, kidata compare and gate) join.
-- sources: (none: a constant table)
-- columns:
--   basis: what the comparison's noise estimate rests on, the first that applies (worked out
--     by the comparing view, docs/statistics.md section 3): 'different centers' (a mean set
--     against a median), 'samples' (both sides kept 7 or more raw samples: each median's
--     distribution-free 97.5% interval, sample_medians, the ratio's interval from the two),
--     'welch' (both sides give a mean, a standard deviation and a sample
--     count of 2 or more: Welch's t-interval of the log ratio of the means, rounding steps
--     added to the variance), 'run-to-run' (both sides' source, GPU and size class have a calibrated
--     envelope, noise_envelopes: the log ratio plus or minus the larger envelope), 'within-run'
--     (both sides have a measured spread of the same statistics: the ratio's range from the
--     two ranges, each widened by half its resolution), 'different spreads' (two measured
--     spreads of different statistics), else what is missing: 'single sample', 'no spread',
--     'zero width' (the candidate's first).
--   placement: where the interval of the latency ratio (candidate / baseline) lies against 1:
--     'below' (wholly below: the candidate is faster beyond noise), 'above' (wholly above),
--     'overlap' (it holds 1, ends included), 'none' (no interval: basis is not a noise
--     estimate).
--   effect: 'beyond' when the ratio itself lies beyond the minimum effect (above 1 +
--     verdict_settings.min_effect or below 1 / (1 + min_effect)), else 'under'.
--   verdict: the first that applies: the basis when it is not a noise estimate ('single
--     sample', 'no spread', 'zero width', 'different centers', 'different spreads'); 'within
--     noise' for placement 'overlap'; 'negligible' for effect 'under' (beyond noise, but
--     smaller than the minimum effect); 'faster' for 'below'; 'slower' for 'above'.
-- notes: A firm 'faster' or 'slower' needs both: an interval of the ratio that excludes 1 and a
--   ratio beyond the minimum effect. A comparison with no noise estimate never gets one: the
--   verdict names what is missing instead. Views join this table on all three inputs, so the
--   rule is written here once.
SELECT
    b.basis,
    p.placement,
    e.effect,
    CASE
        WHEN b.basis NOT IN ('samples', 'welch', 'run-to-run', 'within-run') THEN b.basis
        WHEN p.placement IN ('overlap', 'none') THEN 'within noise'
        WHEN e.effect = 'under' THEN 'negligible'
        WHEN p.placement = 'below' THEN 'faster'
        ELSE 'slower'
    END AS verdict
FROM (VALUES ('samples'), ('welch'), ('run-to-run'), ('within-run'), ('different centers'),
             ('different spreads'), ('single sample'), ('no spread'), ('zero width'))
    AS b(basis)
CROSS JOIN (VALUES ('below'), ('above'), ('overlap'), ('none')) AS p(placement)
CROSS JOIN (VALUES ('beyond'), ('under')) AS e(effect)
