package needle.peer;

import com.yahoo.bullet.bql.BQLConfig;
import com.yahoo.bullet.common.BulletConfig;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The Bullet configuration the peer runs with: Bullet's own defaults (bullet_defaults.yaml inside bullet-core)
 * with only the keys below changed, so that no limit cuts a benchmark run short or truncates a result that needle
 * is compared against. Every key set here is listed in {@link #OVERRIDES} and in the README.
 */
final class PeerConfig {
    /** The record implementations the peer can build records with. */
    static final Map<String, String> RECORD_PROVIDERS = Map.of(
            "avro", "com.yahoo.bullet.record.avro.TypedAvroBulletRecordProvider",
            "simple", "com.yahoo.bullet.record.simple.TypedSimpleBulletRecordProvider");

    /** Key → value changed from Bullet's defaults, and why. */
    static final Map<String, Object> OVERRIDES = new LinkedHashMap<>();

    static {
        // Default true, 50 emits per 100 ms: a Filter bolt kills a query emitting faster than that. An in-process
        // run emits far faster than a topology could, so the limiter would kill RAW queries that match often.
        OVERRIDES.put(BulletConfig.RATE_LIMIT_ENABLE, false);
        // Default 100: the largest LIMIT a RAW query may ask for.
        OVERRIDES.put(BulletConfig.RAW_AGGREGATION_MAX_SIZE, 100_000);
        // Default 500: the largest size (LIMIT) of any aggregation.
        OVERRIDES.put(BulletConfig.AGGREGATION_MAX_SIZE, 100_000);
        // Default 500: the most groups a GROUP BY keeps.
        OVERRIDES.put(BulletConfig.GROUP_AGGREGATION_MAX_SIZE, 100_000);
        // Default 512: GROUP BY is a Tuple sketch, exact up to this many groups (a power of 2).
        OVERRIDES.put(BulletConfig.GROUP_AGGREGATION_SKETCH_ENTRIES, 131_072);
        // Default 16384: COUNT DISTINCT is a Theta sketch, exact up to this many distinct values (a power of 2).
        OVERRIDES.put(BulletConfig.COUNT_DISTINCT_AGGREGATION_SKETCH_ENTRIES, 131_072);
        // Default true: the peer prints only result records, so it does not build the metadata.
        OVERRIDES.put(BulletConfig.RESULT_METADATA_ENABLE, false);
    }

    private PeerConfig() {
    }

    /** Bullet's defaults plus {@link #OVERRIDES}, validated, with the chosen record provider ("avro" or "simple"). */
    static BulletConfig create(String recordProvider) {
        String providerClass = RECORD_PROVIDERS.get(recordProvider);
        if (providerClass == null) {
            throw new IllegalArgumentException("unknown record provider " + recordProvider
                                               + " (one of " + RECORD_PROVIDERS.keySet() + ")");
        }
        // BQLConfig is Bullet's defaults plus BQL's own; the same config compiles the queries (bullet-bql applies
        // the size limits while building the query) and runs them.
        BulletConfig config = new BQLConfig();
        OVERRIDES.forEach(config::set);
        config.set(BulletConfig.RECORD_PROVIDER_CLASS_NAME, providerClass);
        config.validate();
        for (Map.Entry<String, Object> e : OVERRIDES.entrySet()) {
            Object now = config.get(e.getKey());
            if (!String.valueOf(now).equals(String.valueOf(e.getValue()))) {
                throw new IllegalStateException("Bullet rejected " + e.getKey() + " = " + e.getValue()
                                                + " (validated to " + now + ")");
            }
        }
        return config;
    }
}
