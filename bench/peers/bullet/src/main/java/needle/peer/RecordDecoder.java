package needle.peer;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.yahoo.bullet.record.BulletRecord;
import com.yahoo.bullet.record.BulletRecordProvider;
import com.yahoo.bullet.typesystem.Type;
import com.yahoo.bullet.typesystem.TypedObject;

import java.io.IOException;
import java.io.Serializable;
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
    private final boolean explicitTypes;

    /** Fills records through the typed setters ({@code setString}, {@code setStringMap}, ...). */
    RecordDecoder(BulletRecordProvider provider) {
        this(provider, false);
    }

    /**
     * @param explicitTypes false: the typed setters, which make Bullet infer each value's type (for a map or list
     *                      by walking its values); true: {@code typedSet(field, new TypedObject(type, value))} with
     *                      the type the JSON already gave, which skips that inference.
     */
    RecordDecoder(BulletRecordProvider provider, boolean explicitTypes) {
        this.provider = provider;
        this.explicitTypes = explicitTypes;
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

    private void setField(BulletRecord record, String field, JsonToken t, JsonParser p) throws IOException {
        switch (t) {
            case VALUE_STRING:
                store(record, field, Type.STRING, p.getText());
                break;
            case VALUE_NUMBER_INT:
                store(record, field, Type.LONG, p.getLongValue());
                break;
            case VALUE_NUMBER_FLOAT:
                store(record, field, Type.DOUBLE, p.getDoubleValue());
                break;
            case VALUE_TRUE:
            case VALUE_FALSE:
                store(record, field, Type.BOOLEAN, t == JsonToken.VALUE_TRUE);
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

    private static HashMap<String, String> readStringMap(String field, JsonParser p) throws IOException {
        HashMap<String, String> map = new HashMap<>();
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

    private void setMap(BulletRecord record, String field, JsonParser p) throws IOException {
        HashMap<String, Object> map = new HashMap<>();
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
                store(record, field, Type.STRING_MAP, (Serializable) map);
                break;
            case LONG:
                store(record, field, Type.LONG_MAP, (Serializable) map);
                break;
            case DOUBLE:
                HashMap<String, Double> doubles = new HashMap<>();
                for (Map.Entry<String, Object> e : map.entrySet()) {
                    doubles.put(e.getKey(), ((Number) e.getValue()).doubleValue());
                }
                store(record, field, Type.DOUBLE_MAP, doubles);
                break;
            case BOOLEAN:
                store(record, field, Type.BOOLEAN_MAP, (Serializable) map);
                break;
            case STRING_MAP:
                store(record, field, Type.STRING_MAP_MAP, (Serializable) map);
                break;
            default:
                throw new IllegalStateException(kind.name());
        }
    }

    private void setList(BulletRecord record, String field, JsonParser p) throws IOException {
        ArrayList<Object> list = new ArrayList<>();
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
                store(record, field, Type.STRING_MAP_LIST, (Serializable) list);
                break;
            case STRING:
                store(record, field, Type.STRING_LIST, (Serializable) list);
                break;
            case LONG:
                store(record, field, Type.LONG_LIST, (Serializable) list);
                break;
            case DOUBLE:
                ArrayList<Double> doubles = new ArrayList<>(list.size());
                for (Object o : list) {
                    doubles.add(((Number) o).doubleValue());
                }
                store(record, field, Type.DOUBLE_LIST, doubles);
                break;
            case BOOLEAN:
                store(record, field, Type.BOOLEAN_LIST, (Serializable) list);
                break;
            default:
                throw new IllegalStateException(kind.name());
        }
    }

    /** Sets one field, through the setter for its type, or with the type given explicitly. */
    @SuppressWarnings("unchecked")
    private void store(BulletRecord record, String field, Type type, Serializable value) {
        if (explicitTypes) {
            record.typedSet(field, new TypedObject(type, value));
            return;
        }
        switch (type) {
            case STRING: record.setString(field, (String) value); break;
            case LONG: record.setLong(field, (Long) value); break;
            case DOUBLE: record.setDouble(field, (Double) value); break;
            case BOOLEAN: record.setBoolean(field, (Boolean) value); break;
            case STRING_MAP: record.setStringMap(field, (Map<String, String>) value); break;
            case LONG_MAP: record.setLongMap(field, (Map<String, Long>) value); break;
            case DOUBLE_MAP: record.setDoubleMap(field, (Map<String, Double>) value); break;
            case BOOLEAN_MAP: record.setBooleanMap(field, (Map<String, Boolean>) value); break;
            case STRING_MAP_MAP: record.setMapOfStringMap(field, (Map<String, Map<String, String>>) value); break;
            case STRING_MAP_LIST: record.setListOfStringMap(field, (List<Map<String, String>>) value); break;
            case STRING_LIST: record.setStringList(field, (List<String>) value); break;
            case LONG_LIST: record.setLongList(field, (List<Long>) value); break;
            case DOUBLE_LIST: record.setDoubleList(field, (List<Double>) value); break;
            case BOOLEAN_LIST: record.setBooleanList(field, (List<Boolean>) value); break;
            default: throw new IllegalStateException(type.name());
        }
    }

    private static String abbreviate(String line) {
        return line.length() <= 80 ? line : line.substring(0, 80) + "...";
    }
}
