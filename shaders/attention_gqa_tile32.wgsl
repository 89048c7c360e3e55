// attention_gqa.wgsl in tiles of 32 keys: eight threads a key.
const TILE: u32 = 32u;
