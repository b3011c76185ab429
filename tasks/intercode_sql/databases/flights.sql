-- Flights database: airlines, airports, scheduled flights, passengers and bookings.
CREATE TABLE airline (
  airline_id INTEGER PRIMARY KEY,
  airline_name TEXT NOT NULL,
  iata_code TEXT NOT NULL,
  country TEXT NOT NULL,
  founded_in INTEGER NOT NULL,
  fleet_size INTEGER NOT NULL
);

CREATE TABLE airport (
  airport_id INTEGER PRIMARY KEY,
  airport_code TEXT NOT NULL,
  airport_name TEXT NOT NULL,
  city TEXT NOT NULL,
  country TEXT NOT NULL,
  runway_count INTEGER NOT NULL
);

CREATE TABLE flight (
  flight_id INTEGER PRIMARY KEY,
  flight_number TEXT NOT NULL,
  airline_id INTEGER NOT NULL,
  origin_id INTEGER NOT NULL,
  destination_id INTEGER NOT NULL,
  departure_date TEXT NOT NULL,
  distance_km INTEGER NOT NULL,
  base_fare REAL NOT NULL,
  FOREIGN KEY (airline_id) REFERENCES airline (airline_id),
  FOREIGN KEY (origin_id) REFERENCES airport (airport_id),
  FOREIGN KEY (destination_id) REFERENCES airport (airport_id)
);

CREATE TABLE passenger (
  passenger_id INTEGER PRIMARY KEY,
  first_name TEXT NOT NULL,
  last_name TEXT NOT NULL,
  nationality TEXT NOT NULL,
  birth_date TEXT NOT NULL,
  frequent_flyer_miles INTEGER NOT NULL
);

CREATE TABLE booking (
  booking_id INTEGER PRIMARY KEY,
  passenger_id INTEGER NOT NULL,
  flight_id INTEGER NOT NULL,
  seat_no TEXT NOT NULL,
  cabin TEXT NOT NULL,
  price_paid REAL NOT NULL,
  FOREIGN KEY (passenger_id) REFERENCES passenger (passenger_id),
  FOREIGN KEY (flight_id) REFERENCES flight (flight_id)
);

INSERT INTO airline (airline_id, airline_name, iata_code, country, founded_in, fleet_size) VALUES
  (1, 'Skyward Airways', 'SW', 'USA', 1986, 142),
  (2, 'Aurora Air', 'AU', 'Norway', 2003, 48),
  (3, 'Pacific Crest', 'PC', 'Australia', 1992, 96),
  (4, 'Meridian Airlines', 'MR', 'UK', 1971, 210),
  (5, 'Sakura Wings', 'SK', 'Japan', 1998, 120),
  (6, 'Andes Express', 'AX', 'Chile', 2010, 34),
  (7, 'Cedar Jet', 'CJ', 'Canada', 2007, 61),
  (8, 'Rheinflug', 'RF', 'Germany', 1979, 155),
  (9, 'Sahara Link', 'SL', 'Morocco', 2014, 22),
  (10, 'Lagoon Air', 'LG', 'Brazil', 2001, 73);

INSERT INTO airport (airport_id, airport_code, airport_name, city, country, runway_count) VALUES
  (1, 'JFK', 'John F Kennedy International', 'New York', 'USA', 4),
  (2, 'LHR', 'Heathrow', 'London', 'UK', 2),
  (3, 'OSL', 'Gardermoen', 'Oslo', 'Norway', 2),
  (4, 'SYD', 'Kingsford Smith', 'Sydney', 'Australia', 3),
  (5, 'NRT', 'Narita International', 'Tokyo', 'Japan', 2),
  (6, 'SCL', 'Arturo Merino Benitez', 'Santiago', 'Chile', 2),
  (7, 'YYZ', 'Pearson International', 'Toronto', 'Canada', 5),
  (8, 'FRA', 'Frankfurt Main', 'Frankfurt', 'Germany', 4),
  (9, 'CMN', 'Mohammed V International', 'Casablanca', 'Morocco', 2),
  (10, 'GRU', 'Guarulhos International', 'Sao Paulo', 'Brazil', 2),
  (11, 'LAX', 'Los Angeles International', 'Los Angeles', 'USA', 4),
  (12, 'ORD', 'O''Hare International', 'Chicago', 'USA', 8),
  (13, 'MUC', 'Munich Airport', 'Munich', 'Germany', 2),
  (14, 'MEL', 'Tullamarine', 'Melbourne', 'Australia', 2),
  (15, 'BGO', 'Flesland', 'Bergen', 'Norway', 1);

INSERT INTO flight (flight_id, flight_number, airline_id, origin_id, destination_id, departure_date, distance_km, base_fare) VALUES
  (1, 'SW100', 1, 1, 2, '2024-03-01', 5540, 620),
  (2, 'SW101', 1, 2, 1, '2024-03-08', 5540, 640),
  (3, 'SW220', 1, 11, 12, '2024-03-02', 2800, 240.5),
  (4, 'SW310', 1, 12, 7, '2024-03-05', 700, 150),
  (5, 'AU12', 2, 3, 15, '2024-03-01', 310, 89),
  (6, 'AU40', 2, 3, 2, '2024-03-03', 1150, 175.25),
  (7, 'AU41', 2, 2, 3, '2024-03-10', 1150, 169.75),
  (8, 'PC8', 3, 4, 14, '2024-03-02', 710, 130),
  (9, 'PC90', 3, 4, 11, '2024-03-04', 12050, 1180),
  (10, 'PC91', 3, 11, 4, '2024-03-12', 12050, 1150),
  (11, 'MR1', 4, 2, 1, '2024-03-01', 5540, 690),
  (12, 'MR75', 4, 2, 8, '2024-03-06', 650, 140),
  (13, 'MR400', 4, 2, 9, '2024-03-07', 2070, 260),
  (14, 'SK5', 5, 5, 11, '2024-03-03', 8750, 980),
  (15, 'SK22', 5, 5, 4, '2024-03-09', 7820, 870.5),
  (16, 'AX300', 6, 6, 10, '2024-03-04', 2600, 310),
  (17, 'AX301', 6, 10, 6, '2024-03-11', 2600, 295),
  (18, 'CJ77', 7, 7, 1, '2024-03-02', 560, 135),
  (19, 'CJ88', 7, 7, 11, '2024-03-06', 3500, 410),
  (20, 'RF10', 8, 8, 13, '2024-03-01', 300, 95),
  (21, 'RF400', 8, 8, 1, '2024-03-05', 6200, 760),
  (22, 'RF410', 8, 13, 5, '2024-03-08', 9370, 1050),
  (23, 'SL9', 9, 9, 8, '2024-03-06', 2330, 240),
  (24, 'LG70', 10, 10, 1, '2024-03-03', 7680, 820),
  (25, 'LG71', 10, 1, 10, '2024-03-13', 7680, 845),
  (26, 'MR77', 4, 8, 2, '2024-03-09', 650, 150);

INSERT INTO passenger (passenger_id, first_name, last_name, nationality, birth_date, frequent_flyer_miles) VALUES
  (1, 'Erik', 'Halvorsen', 'Norway', '1985-04-12', 84000),
  (2, 'Sarah', 'Mitchell', 'USA', '1990-09-03', 126000),
  (3, 'Haruto', 'Sasaki', 'Japan', '1978-01-25', 203000),
  (4, 'Chloe', 'Bennett', 'UK', '1995-06-18', 12000),
  (5, 'Mateo', 'Fuentes', 'Chile', '1988-11-30', 45000),
  (6, 'Amara', 'Diallo', 'Morocco', '2000-02-14', 3000),
  (7, 'Liam', 'O''Connor', 'Canada', '1972-07-07', 310000),
  (8, 'Greta', 'Vogel', 'Germany', '1983-03-21', 97000),
  (9, 'Lucas', 'Almeida', 'Brazil', '1993-12-09', 28000),
  (10, 'Olivia', 'Harper', 'Australia', '1998-08-27', 56000),
  (11, 'Noah', 'Friedman', 'USA', '1969-05-02', 410000),
  (12, 'Ingrid', 'Solberg', 'Norway', '1991-10-15', 0),
  (13, 'Kenji', 'Watanabe', 'Japan', '1986-02-28', 152000),
  (14, 'Fiona', 'Gallagher', 'UK', '1979-12-19', 238000),
  (15, 'Rafael', 'Souza', 'Brazil', '2001-04-04', 0),
  (16, 'Emily', 'Zhang', 'Canada', '1996-01-11', 67000),
  (17, 'Jonas', 'Keller', 'Germany', '1975-09-09', 188000),
  (18, 'Aylin', 'Demir', 'Germany', '1999-06-30', 9000),
  (19, 'Marcus', 'Reid', 'Australia', '1982-11-02', 143000),
  (20, 'Sofia', 'Castillo', 'Chile', '1994-03-15', 21000);

INSERT INTO booking (booking_id, passenger_id, flight_id, seat_no, cabin, price_paid) VALUES
  (1, 2, 1, '12A', 'Economy', 620),
  (2, 11, 1, '2A', 'First', 2450),
  (3, 14, 2, '4C', 'Business', 1720),
  (4, 2, 3, '18F', 'Economy', 240.5),
  (5, 11, 4, '1B', 'Business', 390),
  (6, 1, 5, '9D', 'Economy', 89),
  (7, 12, 5, '10A', 'Economy', 89),
  (8, 1, 6, '3A', 'Business', 480),
  (9, 4, 7, '22C', 'Economy', 169.75),
  (10, 10, 8, '15E', 'Economy', 130),
  (11, 19, 9, '3F', 'Business', 3100),
  (12, 10, 10, '31B', 'Economy', 1150),
  (13, 14, 11, '1A', 'First', 2900),
  (14, 4, 12, '19A', 'Economy', 140),
  (15, 8, 12, '2D', 'Business', 410),
  (16, 6, 13, '25F', 'Economy', 260),
  (17, 3, 14, '5A', 'Business', 2650),
  (18, 13, 14, '40C', 'Economy', 980),
  (19, 3, 15, '6B', 'Business', 2380),
  (20, 5, 16, '14C', 'Economy', 310),
  (21, 20, 16, '14D', 'Economy', 310),
  (22, 9, 17, '8A', 'Economy', 295),
  (23, 7, 18, '2C', 'Business', 360),
  (24, 16, 19, '17B', 'Economy', 410),
  (25, 7, 19, '1A', 'First', 1320),
  (26, 17, 20, '6F', 'Economy', 95),
  (27, 18, 20, '7A', 'Economy', 95),
  (28, 17, 21, '2A', 'First', 2480),
  (29, 8, 21, '11C', 'Business', 1890),
  (30, 13, 22, '4A', 'Business', 2720),
  (31, 6, 23, '12B', 'Economy', 240),
  (32, 9, 24, '3C', 'Business', 2050),
  (33, 15, 24, '28E', 'Economy', 820),
  (34, 2, 25, '23A', 'Economy', 845),
  (35, 11, 11, '1K', 'First', 2900),
  (36, 16, 18, '20D', 'Economy', 135),
  (37, 19, 10, '5B', 'Business', 3050),
  (38, 5, 17, '21A', 'Economy', 295),
  (39, 7, 4, '16C', 'Economy', 150),
  (40, 14, 26, '3D', 'Business', 430);
