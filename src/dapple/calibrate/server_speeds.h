// Per-server device speeds from the compute loop `dapple calibrate` times (Note [Per-server
// speeds] in server_speeds.cc). Pure: no communication.
#pragma once

#include <vector>

namespace dapple {

// Two servers' speeds within this share of each other are one speed: the same hardware
// times the same loop a few percent apart, and a cluster should not split on noise.
inline constexpr double kServerSpeedTolerance = 0.1;

// On one machine: ranks whose loop times (every rank running it) are further apart than
// this ratio run on cores that are not alike (a virtual machine's cores may be: here one ran
// the same work 1.4-2x slower than the other). calibrate says so in its summary: a profile
// then takes the speed of the core it ran on, and the slowest rank sets a step's pace, while
// the one-machine model (emulation.shared_compute) charges their mean.
inline constexpr double kUnalikeCoresRatio = 1.2;

// The speed of each server's devices relative to the profile's device: `alone_s` (the loop
// on rank 0 with the other ranks idle, the device the profile is taken on) over the mean of
// the server's ranks' `together_by_rank_s` (the same loop while every rank runs it). When
// the fastest server is within `tolerance` of the slowest, every server gets the job's one
// speed instead: alone_s over the mean of all ranks. Servers are numbered from 0 in
// `server_of_rank` (ServersOfRanks), each with at least one rank.
// REQUIRES: together_by_rank_s.size() == server_of_rank.size() > 0, every time > 0.
std::vector<double> ServerSpeeds(double alone_s, const std::vector<double>& together_by_rank_s,
                                 const std::vector<int>& server_of_rank,
                                 double tolerance = kServerSpeedTolerance);

}  // namespace dapple
