-- view: verdict_rule
-- purpose: The one verdict rule: what a comparison of two latencies may conclude, given what each side's noise estimate rests on and where their noise ranges lie.
-- grain: one row per (candidate_evidence, baseline_evidence, placement): a lookup table the comparing views (speedups, trends) join.
-- sources: (none: a constant table)
-- columns:
--   candidate_evidence: evidence of the side being judged (the candidate in speedups, the newer
--     result in trends): 'measured', 'repeated runs', 'single sample', 'no spread', 'zero
--     width' or 'below resolution' (see latency_statistics.evidence; 'repeated runs' when the
--     comparing view judges by run-to-run noise instead of within-run spreads).
--   baseline_evidence: evidence of the other side, same values.
--   placement: where the judged side's noise range lies against the other's, as the comparing
--     view works it out: 'below' (entirely below: judged high < other low, or beyond the
--     run-to-run noise downwards), 'above' (entirely above), 'overlap' (touching ends
--     included), 'different spreads' (the two ranges are made of different statistics, e.g.
--     p20-p80 against p25-p75, so they cannot be set against each other), 'different
--     centers' (one side's center is a median, the other's a mean: their ratio mixes two
--     statistics, see run_statistics.center).
--   verdict: the first that applies: the candidate's evidence when it is neither 'measured'
--     nor 'repeated runs' (e.g. 'single sample'), then the baseline's; 'different centers';
--     'different spreads';
--     'faster' for placement 'below'; 'slower' for 'above'; 'within noise' for 'overlap'.
-- notes: A side with no measured spread (no quantiles, a zero-width range, a range under the
--   timer resolution, or a single sample) never yields a firm 'faster' or 'slower': the verdict
--   names what is missing instead. Views join this table on all three inputs, so the rule is
--   written here once.
SELECT
    c.evidence AS candidate_evidence,
    b.evidence AS baseline_evidence,
    p.placement,
    CASE
        WHEN c.evidence NOT IN ('measured', 'repeated runs') THEN c.evidence
        WHEN b.evidence NOT IN ('measured', 'repeated runs') THEN b.evidence
        WHEN p.placement = 'different centers' THEN 'different centers'
        WHEN p.placement = 'different spreads' THEN 'different spreads'
        WHEN p.placement = 'below' THEN 'faster'
        WHEN p.placement = 'above' THEN 'slower'
        ELSE 'within noise'
    END AS verdict
FROM (VALUES ('measured'), ('repeated runs'), ('single sample'), ('no spread'), ('zero width'),
             ('below resolution')) AS c(evidence)
CROSS JOIN (VALUES ('measured'), ('repeated runs'), ('single sample'), ('no spread'),
                   ('zero width'), ('below resolution')) AS b(evidence)
CROSS JOIN (VALUES ('below'), ('above'), ('overlap'), ('different spreads'),
                   ('different centers')) AS p(placement)
