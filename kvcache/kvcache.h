// kvcache/: the memory manager the engine stands on. Include this for all of it.
//   BlockPool + BlockTable  paged K/V blocks for the full-attention layers
//   KvPoolLayout            64-bit offsets of a token's row in a layer's K/V pool
//   StatePool               DeltaNet conv + recurrent state slots, one per sequence
//   size_pools              size the two pools (from a memory budget, or explicit counts)
//   PrefixCache             blocks and state snapshots kept for later requests with the same prefix
#pragma once

#include "kvcache/block_pool.h"
#include "kvcache/block_table.h"
#include "kvcache/capacity.h"
#include "kvcache/kv_layout.h"
#include "kvcache/prefix_cache.h"
#include "kvcache/state_pool.h"
