// attention_gqa.wgsl in tiles of 64 keys: four threads a key.
const TILE: u32 = 64u;
