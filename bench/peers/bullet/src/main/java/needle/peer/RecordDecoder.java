package needle.peer;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.yahoo.bullet.record.BulletRecord;
import com.yahoo.bullet.record.BulletRecordProvider;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Turns one NDJSON line (a flat JSON object) into a Bullet record through the record's typed setters.
 *
 * <p>JSON types map to Bullet types as follows; every value of a map or list must share one type, as Bullet's
 * type system requires (a mixed map is an error naming the field, never a silent coercion):
 * <ul>
 *   <li>string → STRING ({@code setString}); integral number → LONG ({@code setLong}); other number → DOUBLE
 *       ({@code setDouble}); true/false → BOOLEAN ({@code setBoolean}); null → the field is left unset;</li>
 *   <li>object of strings / integers / numbers / booleans → STRING_MAP / LONG_MAP / DOUBLE_MAP / BOOLEAN_MAP;</li>
 *   <li>object of objects of strings → STRING_MAP_MAP ({@code setMapOfStringMap});</li>
 *   <li>array of strings / integers / numbers / booleans → STRING_LIST / LONG_LIST / DOUBLE_LIST / BOOLEAN_LIST;</li>
 *   <li>array of objects of strings → STRING_MAP_LIST ({@code setListOfStringMap}).</li>
 * </ul>
 */
final class RecordDecoder {
    private final JsonFactory factory = new JsonFactory();
    private final BulletRecordProvider provider;

    RecordDecoder(BulletRecordProvider provider) {
        this.provider = provider;
    }

    BulletRecord decode(String line) throws IOException {
        BulletRecord record = provider.getInstance();
        try (JsonParser p = factory.createParser(line)) {
            if (p.nextToken() != JsonToken.START_OBJECT) {
                throw new IOException("a record must be a JSON object: " + abbreviate(line));
            }
            JsonToken t;
            while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
                String field = p.currentName();
                setField(record, field, p.nextToken(), p);
            }
            if (t != JsonToken.END_OBJECT) {
                throw new IOException("unexpected " + t + " in record: " + abbreviate(line));
            }
            if (p.nextToken() != null) {
                throw new IOException("trailing data after the record: " + abbreviate(line));
            }
        }
        return record;
    }

    private static void setField(BulletRecord record, String field, JsonToken t, JsonParser p) throws IOException {
        switch (t) {
            case VALUE_STRING:
                record.setString(field, p.getText());
                break;
            case VALUE_NUMBER_INT:
                record.setLong(field, p.getLongValue());
                break;
            case VALUE_NUMBER_FLOAT:
                record.setDouble(field, p.getDoubleValue());
                break;
            case VALUE_TRUE:
            case VALUE_FALSE:
                record.setBoolean(field, t == JsonToken.VALUE_TRUE);
                break;
            case VALUE_NULL:
                break;
            case START_OBJECT:
                setMap(record, field, p);
                break;
            case START_ARRAY:
                setList(record, field, p);
                break;
            default:
                throw new IOException("field " + field + ": unexpected " + t);
        }
    }

    /** The kind of the scalar values seen in one map or list. */
    private enum Kind { NONE, STRING, LONG, DOUBLE, BOOLEAN, STRING_MAP }

    private static Kind kindOf(String field, JsonToken t) throws IOException {
        switch (t) {
            case VALUE_STRING: return Kind.STRING;
            case VALUE_NUMBER_INT: return Kind.LONG;
            case VALUE_NUMBER_FLOAT: return Kind.DOUBLE;
            case VALUE_TRUE:
            case VALUE_FALSE: return Kind.BOOLEAN;
            case START_OBJECT: return Kind.STRING_MAP;
            default: throw new IOException("field " + field + ": " + t + " is not supported inside a map or list");
        }
    }

    private static Kind merge(String field, Kind seen, Kind next) throws IOException {
        if (seen == Kind.NONE || seen == next) {
            return next;
        }
        // A map or list of numbers that mixes integers and decimals is a list of doubles.
        if ((seen == Kind.LONG && next == Kind.DOUBLE) || (seen == Kind.DOUBLE && next == Kind.LONG)) {
            return Kind.DOUBLE;
        }
        throw new IOException("field " + field + ": mixes " + seen + " and " + next + " values");
    }

    private static Object scalar(JsonToken t, JsonParser p) throws IOException {
        switch (t) {
            case VALUE_STRING: return p.getText();
            case VALUE_NUMBER_INT: return p.getLongValue();
            case VALUE_NUMBER_FLOAT: return p.getDoubleValue();
            default: return t == JsonToken.VALUE_TRUE;
        }
    }

    private static Map<String, String> readStringMap(String field, JsonParser p) throws IOException {
        Map<String, String> map = new HashMap<>();
        JsonToken t;
        while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
            String key = p.currentName();
            JsonToken v = p.nextToken();
            if (v == JsonToken.VALUE_NULL) {
                continue;
            }
            if (v != JsonToken.VALUE_STRING) {
                throw new IOException("field " + field + ": a nested map must hold strings, found " + v);
            }
            map.put(key, p.getText());
        }
        return map;
    }

    @SuppressWarnings("unchecked")
    private static void setMap(BulletRecord record, String field, JsonParser p) throws IOException {
        Map<String, Object> map = new HashMap<>();
        Kind kind = Kind.NONE;
        JsonToken t;
        while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
            String key = p.currentName();
            JsonToken v = p.nextToken();
            if (v == JsonToken.VALUE_NULL) {
                continue;
            }
            kind = merge(field, kind, kindOf(field, v));
            map.put(key, v == JsonToken.START_OBJECT ? readStringMap(field, p) : scalar(v, p));
        }
        switch (kind) {
            case NONE:
            case STRING:
                record.setStringMap(field, (Map<String, String>) (Map<String, ?>) map);
                break;
            case LONG:
                record.setLongMap(field, (Map<String, Long>) (Map<String, ?>) map);
                break;
            case DOUBLE:
                Map<String, Double> doubles = new HashMap<>();
                for (Map.Entry<String, Object> e : map.entrySet()) {
                    doubles.put(e.getKey(), ((Number) e.getValue()).doubleValue());
                }
                record.setDoubleMap(field, doubles);
                break;
            case BOOLEAN:
                record.setBooleanMap(field, (Map<String, Boolean>) (Map<String, ?>) map);
                break;
            case STRING_MAP:
                record.setMapOfStringMap(field, (Map<String, Map<String, String>>) (Map<String, ?>) map);
                break;
            default:
                throw new IllegalStateException(kind.name());
        }
    }

    @SuppressWarnings("unchecked")
    private static void setList(BulletRecord record, String field, JsonParser p) throws IOException {
        List<Object> list = new ArrayList<>();
        Kind kind = Kind.NONE;
        JsonToken t;
        while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
            if (t == JsonToken.VALUE_NULL) {
                throw new IOException("field " + field + ": null inside a list is not supported");
            }
            kind = merge(field, kind, kindOf(field, t));
            list.add(t == JsonToken.START_OBJECT ? readStringMap(field, p) : scalar(t, p));
        }
        switch (kind) {
            case NONE:
            case STRING_MAP:
                record.setListOfStringMap(field, (List<Map<String, String>>) (List<?>) list);
                break;
            case STRING:
                record.setStringList(field, (List<String>) (List<?>) list);
                break;
            case LONG:
                record.setLongList(field, (List<Long>) (List<?>) list);
                break;
            case DOUBLE:
                List<Double> doubles = new ArrayList<>(list.size());
                for (Object o : list) {
                    doubles.add(((Number) o).doubleValue());
                }
                record.setDoubleList(field, doubles);
                break;
            case BOOLEAN:
                record.setBooleanList(field, (List<Boolean>) (List<?>) list);
                break;
            default:
                throw new IllegalStateException(kind.name());
        }
    }

    private static String abbreviate(String line) {
        return line.length() <= 80 ? line : line.substring(0, 80) + "...";
    }
}
