-- view: student_t
-- purpose: The 0.975 quantiles of Student's t the interval views use (speedup_summary over kernels, kernel_speedups over workloads), tabulated once.
-- grain: one row per range of degrees of freedom, df_from to df_to: a lookup table the interval views join on df BETWEEN df_from AND df_to.
-- sources: (none: a constant table)
-- columns:
--   df_from: smallest degrees of freedom of the row.
--   df_to: largest degrees of freedom of the row.
--   t: the 0.975 quantile of Student's t at df_from (a two-sided 95% interval).
-- notes: df 1-30 as tabulated (Abramowitz & Stegun, table 26.10); 31-39 use df 30, 40-59 df
--   40, 60-119 df 60, 120 and above df 120 (1.980): within each range the interval is slightly
--   wider than exact, never narrower.
SELECT CAST(df_from AS BIGINT) AS df_from, CAST(df_to AS BIGINT) AS df_to,
    CAST(t AS DOUBLE) AS t
FROM (VALUES
    (1, 1, 12.706), (2, 2, 4.303), (3, 3, 3.182), (4, 4, 2.776), (5, 5, 2.571),
    (6, 6, 2.447), (7, 7, 2.365), (8, 8, 2.306), (9, 9, 2.262), (10, 10, 2.228),
    (11, 11, 2.201), (12, 12, 2.179), (13, 13, 2.160), (14, 14, 2.145), (15, 15, 2.131),
    (16, 16, 2.120), (17, 17, 2.110), (18, 18, 2.101), (19, 19, 2.093), (20, 20, 2.086),
    (21, 21, 2.080), (22, 22, 2.074), (23, 23, 2.069), (24, 24, 2.064), (25, 25, 2.060),
    (26, 26, 2.056), (27, 27, 2.052), (28, 28, 2.048), (29, 29, 2.045), (30, 39, 2.042),
    (40, 59, 2.021), (60, 119, 2.000), (120, 2147483647, 1.980)
) AS quantiles(df_from, df_to, t)
