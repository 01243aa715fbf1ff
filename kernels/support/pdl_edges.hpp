// pdl_edges.hpp — the launch sites of programmatic dependent launch (pdl.cuh) and the ones that
// use it by default; host-only, so that the benchmark can name them (`histeq bench --tune pdl=`).
#pragma once

namespace histeq::kernels::pdl {

/// The dependent launch sites (the kernel launched after its producer).
enum Edge : unsigned {
  kLutStep = 1,            ///< CLAHE per-tile LUTs after global-counter tile histograms
  kPairLuts = 2,           ///< 16-bit CLAHE LUT pairs after the LUT step
  kFlatApply8 = 4,         ///< 8-bit CLAHE flat apply (small planes) after the fused histograms
  kStripApply8 = 8,        ///< 8-bit CLAHE strip / cell apply after the fused histograms
  kHist16Sum = 16,         ///< hist_u16 sum of the packed partials after the counting kernel
  kBatchApply = 32,        ///< batched equalizer: apply after the histograms and LUTs
  kEqualize16 = 64,        ///< 16-bit equalization: LUT after the histogram, apply after the LUT
  kFlatApply16 = 128,      ///< 16-bit CLAHE apply from per-tile LUTs after the LUT step
  kPairApply16 = 256,      ///< 16-bit CLAHE flat apply from LUT pairs after the pairs kernel
  kCellApply16 = 512,      ///< 16-bit CLAHE cell-column apply after the one-launch tile clusters
  kRegionEqualize = 1024,  ///< masked 8-bit equalization, pair path: the region histogram (and
                           ///< LUT) after the previous call, the apply after it
};
/// The edges measured faster (H200, `histeq bench --clahe` and bench/python; docs/kernels.md,
/// CLAHE, programmatic dependent launch): all but two. Off: kPairApply16 — after the packed tile
/// histograms (128 KiB of shared memory per block) the chain of programmatic launches never lets an
/// SM drain, and the gather-bound pair apply then runs with the small L1 of that carve-out (16M
/// natural 166 µs against 138); kEqualize16, not measured. Where the dependent is one wave of fixed
/// work per block (the 8-bit flat apply, the hist_u16 sum), its producer does not call
/// allow_dependents(): placed during the producer's run, those blocks piled onto the SMs it had
/// left first (1M 8-bit 14.4 against 13.4 µs); launched as the producer's blocks exit, they
/// spread evenly and still skip the launch gap (12.4–12.6 µs). kCellApply16: 16M 83.9 → 82.3
/// µs natural, 264.8 → 258.0 uniform. kRegionEqualize: on, the shape of kBatchApply (a histogram
/// launch whose last block builds the LUT, then an apply that does not overlap it), not measured
/// on its own yet (`histeq bench --equalize` rows equalize:mask-*:pair against :pair-nopdl).
inline constexpr unsigned kDefaultEdges = kLutStep | kPairLuts | kFlatApply8 | kStripApply8 |
                                          kHist16Sum | kBatchApply | kFlatApply16 | kCellApply16 |
                                          kRegionEqualize;

/// Every edge with a few words on it, for the benchmark's help.
struct EdgeName {
  Edge edge;
  const char* what;
};
inline constexpr EdgeName kEdgeNames[] = {
    {kLutStep, "CLAHE LUT step"},
    {kPairLuts, "16-bit LUT pairs"},
    {kFlatApply8, "8-bit flat apply"},
    {kStripApply8, "8-bit strip/cell apply"},
    {kHist16Sum, "hist16 sum"},
    {kBatchApply, "batched apply"},
    {kEqualize16, "16-bit equalize"},
    {kFlatApply16, "16-bit flat apply"},
    {kPairApply16, "16-bit pair apply"},
    {kCellApply16, "16-bit cell apply"},
    {kRegionEqualize, "masked equalize (pair path)"},
};

}  // namespace histeq::kernels::pdl
