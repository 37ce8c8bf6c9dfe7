package needle.peer;

import com.yahoo.bullet.common.BulletConfig;
import com.yahoo.bullet.record.BulletRecord;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class BulletPeerTest {
    private static final String RECORDS = String.join("\n",
            "{\"id\":\"a1\",\"device\":\"phone\",\"browser_name\":\"chrome\",\"timespent\":10,"
            + "\"demographics\":{\"country\":\"US\",\"age\":\"31\"},\"tags\":[{\"k\":\"x\"}]}",
            "{\"id\":\"a2\",\"device\":\"desktop\",\"browser_name\":\"firefox\",\"timespent\":20,"
            + "\"demographics\":{\"country\":\"IN\",\"age\":\"25\"},\"tags\":[{\"k\":\"y\"},{\"k\":\"z\"}]}",
            "",
            "{\"id\":\"a3\",\"device\":\"phone\",\"browser_name\":\"safari\",\"timespent\":30,"
            + "\"demographics\":{\"country\":\"US\",\"age\":\"40\"},\"tags\":[]}",
            "{\"id\":\"a4\",\"device\":\"phone\",\"browser_name\":\"chrome\",\"timespent\":40,"
            + "\"demographics\":{\"country\":\"US\",\"age\":\"52\"},\"tags\":[{\"k\":\"x\"}]}",
            "{\"id\":\"a5\",\"device\":\"tablet\",\"browser_name\":\"chrome\",\"timespent\":50,"
            + "\"demographics\":{\"country\":\"GB\",\"age\":\"19\"},\"tags\":[{\"k\":\"w\"}]}",
            "{\"id\":\"a6\",\"device\":\"desktop\",\"browser_name\":\"firefox\",\"timespent\":60,"
            + "\"demographics\":{\"country\":\"US\",\"age\":\"63\"},\"tags\":[{\"k\":\"x\"}]}") + "\n";

    private static final String QUERIES = String.join("\n",
            "-- a RAW filter on a map subfield, with LIMIT: the first two US records",
            "SELECT id, device FROM STREAM(30000, TIME) WHERE demographics.country = 'US' LIMIT 2",
            "",
            "SELECT device, COUNT(*) AS n FROM STREAM(30000, TIME) GROUP BY device",
            "SELECT COUNT(DISTINCT browser_name) AS browsers FROM STREAM(30000, TIME)") + "\n";

    private static BulletPeer.Options options(Path dir, String records, String queries) throws Exception {
        Path r = dir.resolve("records.ndjson");
        Path q = dir.resolve("queries.bql");
        Files.writeString(r, records, StandardCharsets.UTF_8);
        Files.writeString(q, queries, StandardCharsets.UTF_8);
        return BulletPeer.Options.parse(new String[] {
            "--records", r.toString(), "--queries", q.toString(), "--repeat", "2", "--warmup", "1"});
    }

    @ParameterizedTest
    @CsvSource({"FILTER, avro, false", "QUERIER, avro, false", "FILTER, simple, true", "QUERIER, simple, false"})
    void threeQueriesGiveExactResults(BulletEngine.Mode mode, String record, boolean explicitTypes,
                                      @TempDir Path dir) throws Exception {
        BulletPeer.Options options = options(dir, RECORDS, QUERIES);
        options.mode = mode;
        options.record = record;
        options.explicitTypes = explicitTypes;
        BulletPeer.Report report = BulletPeer.run(options);

        assertEquals(3, report.queries);
        assertEquals(6, report.records);
        assertEquals(3, report.results.size());

        // RAW with LIMIT 2: the first two matching records in stream order, only the selected fields.
        assertEquals(List.of(Map.of("id", "a1", "device", "phone"), Map.of("id", "a3", "device", "phone")),
                     report.results.get(0));

        // GROUP BY COUNT: one record per group; Bullet gives groups in no particular order.
        Set<Map<String, Object>> groups = new HashSet<>(report.results.get(1));
        assertEquals(3, report.results.get(1).size());
        assertEquals(Set.of(Map.of("device", "phone", "n", 3L),
                            Map.of("device", "desktop", "n", 2L),
                            Map.of("device", "tablet", "n", 1L)), groups);

        // COUNT DISTINCT is a Theta sketch estimate, rounded to a long by Bullet: exact below the sketch size.
        assertEquals(List.of(Map.of("browsers", 3L)), report.results.get(2));

        assertTrue(report.recordsPerSec > 0 && report.decodeRecordsPerSec > 0);
        // decoding is timed over whole passes, at least DECODE_TIMED_RECORDS records: 3,334 passes of 6
        assertEquals(6L * 3334, report.decodeTimedRecords);
        assertEquals(0, report.timedOut);
        assertEquals(0, report.rateLimited);
    }

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void jsonTypesBecomeBulletTypes(boolean explicitTypes) throws Exception {
        BulletConfig config = PeerConfig.create("avro");
        RecordDecoder decoder = new RecordDecoder(config.getBulletRecordProvider(), explicitTypes);
        BulletRecord record = decoder.decode("{\"s\":\"x\",\"l\":7,\"d\":1.5,\"b\":true,\"n\":null,"
                                             + "\"m\":{\"a\":\"1\"},\"lm\":[{\"a\":\"1\"},{\"b\":\"2\"}],"
                                             + "\"ll\":[1,2],\"mm\":{\"k\":{\"a\":\"1\"}}}");
        Map<String, ?> data = record.toUnmodifiableDataMap();
        assertEquals("x", data.get("s"));
        assertEquals(7L, data.get("l"));
        assertEquals(1.5, data.get("d"));
        assertEquals(true, data.get("b"));
        assertTrue(!data.containsKey("n"));
        assertEquals(Map.of("a", "1"), data.get("m"));
        assertEquals(List.of(Map.of("a", "1"), Map.of("b", "2")), data.get("lm"));
        assertEquals(List.of(1L, 2L), data.get("ll"));
        assertEquals(Map.of("k", Map.of("a", "1")), data.get("mm"));
        assertEquals("LONG", record.typedGet("l").getType().name());
        assertEquals("STRING_MAP_LIST", record.typedGet("lm").getType().name());
    }

    @Test
    void mixedMapIsAnError() {
        RecordDecoder decoder = new RecordDecoder(PeerConfig.create("simple").getBulletRecordProvider());
        Exception e = assertThrows(Exception.class, () -> decoder.decode("{\"m\":{\"a\":\"1\",\"b\":2}}"));
        assertTrue(e.getMessage().contains("field m"), e.getMessage());
    }

    @Test
    void badQueryStopsTheRun(@TempDir Path dir) throws Exception {
        BulletPeer.Options options = options(dir, RECORDS, "SELECT FROM WHERE\n");
        Exception e = assertThrows(IllegalArgumentException.class, () -> BulletPeer.run(options));
        assertTrue(e.getMessage().startsWith("query 1 does not compile"), e.getMessage());
    }

    @Test
    void windowedQueryIsRefused(@TempDir Path dir) throws Exception {
        BulletPeer.Options options = options(dir, RECORDS,
                "SELECT COUNT(*) FROM STREAM(30000, TIME) WINDOWING TUMBLING(1000, TIME)\n");
        Exception e = assertThrows(IllegalArgumentException.class, () -> BulletPeer.run(options));
        assertTrue(e.getMessage().contains("has a WINDOW clause"), e.getMessage());
    }
}
