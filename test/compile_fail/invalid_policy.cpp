// SPDX-License-Identifier: Apache-2.0
// Must fail to compile: a window of 0 is not a policy.
#include <replayssm/policy/policy.hpp>

int main() { return replayssm::replay_policy<0, replayssm::fp32_format>::window; }
