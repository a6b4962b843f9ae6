// Small profiles and clusters with round numbers, so expected costs are computed by hand.
#pragma once

#include "dapple/format/cluster.h"
#include "dapple/format/profile.h"

namespace dapple::testing {

// A chain of 4 layers at PBS 4: fwd 1,2,3,4 ms; bwd 2,4,6,8 ms; activations 100, 200,
// 400, 800 B; parameters 10, 20, 30, 40 B; layer 2 saves 50 B for its backward.
inline Profile FourLayerChain() {
  Profile p;
  p.model = "chain4";
  p.batch_size = 4;
  for (int i = 0; i < 4; ++i) {
    LayerProfile l;
    l.id = "l" + std::to_string(i);
    l.forward_ms = i + 1;
    l.backward_ms = 2.0 * (i + 1);
    l.activation_bytes = 100.0 * (1 << i);
    l.parameter_bytes = 10.0 * (i + 1);
    p.layers.push_back(l);
  }
  p.layers[2].saved_bytes = 50;
  return p;
}

// 2 servers x 4 devices. Inside a server 1e6 B/s (1 B = 1 us) and 1 ms latency; between
// servers 1e5 B/s and 2 ms latency. Server 1's devices run twice as fast and have 8 GB.
inline Cluster TwoByFour() {
  Cluster c;
  c.name = "two-by-four";
  c.servers = {{4, std::nullopt}, {4, DeviceSpec{8e9, 2.0}}};
  c.device = DeviceSpec{16e9, 1.0};
  c.intra_server = LinkSpec{1e6, 1e-3};
  c.inter_server = LinkSpec{1e5, 2e-3};
  return c;
}

}  // namespace dapple::testing
