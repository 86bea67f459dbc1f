#pragma once
// warpvm-sim's multi-GPU placement mode (issue #6): `warpvm-sim --gpus N --placement ...`.

namespace warpvm::sim {

/// True when the command line asks for the placement mode (--gpus or --placement given).
bool wants_placement_sim(int argc, char** argv);

/// Runs the placement mode; returns the exit status.
int run_placement_sim(int argc, char** argv);

}  // namespace warpvm::sim
